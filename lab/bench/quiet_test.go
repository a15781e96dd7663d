//go:build linux

package bench

import (
	"context"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    cpuTimes
		wantErr bool
	}{
		{"linux 6", "cpu  85174 0 49996 107807 1604 0 256 894 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
			cpuTimes{busy: 85174 + 49996 + 256 + 894, total: 85174 + 49996 + 107807 + 1604 + 256 + 894}, false},
		{"old kernel, four fields", "cpu 10 20 30 40\n", cpuTimes{busy: 60, total: 100}, false},
		{"guest fields ignored", "cpu 1 1 1 1 1 1 1 1 500 500", cpuTimes{busy: 6, total: 8}, false},
		{"per-cpu line first", "cpu0 1 2 3 4 5\n", cpuTimes{}, true},
		{"too short", "cpu 1 2 3", cpuTimes{}, true},
		{"not a number", "cpu 1 2 x 4 5", cpuTimes{}, true},
		{"negative", "cpu 1 2 -3 4 5", cpuTimes{}, true},
		{"empty", "", cpuTimes{}, true},
		{"overflow", "cpu 18446744073709551615 1 0 0 0", cpuTimes{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("parseProcStat(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("cpu  85174 0 49996 107807 1604 0 256 894 0 0\n"))
	f.Add([]byte("cpu 1 2 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseProcStat(b)
		if err == nil && got.busy > got.total {
			t.Fatalf("busy %d > total %d", got.busy, got.total)
		}
	})
}

// TestWaitQuiet checks that the wait is bounded and that it stops at once
// when the context ends: a machine busy with other tests is never quiet.
func TestWaitQuiet(t *testing.T) {
	start := time.Now()
	waited, _, err := waitQuiet(context.Background(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second || waited > el {
		t.Fatalf("waited %v (reported %v) with a bound of 50ms", el, waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, quiet, err := waitQuiet(ctx, time.Hour); err == nil && !quiet {
		t.Fatal("a cancelled wait reported no error")
	}
}
