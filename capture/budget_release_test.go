package capture

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

func TestShouldRelease(t *testing.T) {
	for _, c := range []struct {
		name               string
		last, allocs, free uint64
		want               bool
	}{
		{"first look", 0, 1 << 30, 64 << 20, false},
		{"quiet, much free", 100 << 20, 100<<20 + 1000, 64 << 20, true},
		{"quiet, little free", 100 << 20, 100<<20 + 1000, trimAbove, false},
		{"busy, much free", 100 << 20, 100<<20 + quietAllocs, 64 << 20, false},
	} {
		if got := shouldRelease(c.last, c.allocs, c.free); got != c.want {
			t.Errorf("%s: shouldRelease(%d, %d, %d) = %v, want %v", c.name, c.last, c.allocs, c.free, got, c.want)
		}
	}
}

func TestShouldTrimImage(t *testing.T) {
	for _, c := range []struct {
		name                  string
		last, allocs, trimmed uint64
		want                  bool
	}{
		{"first look", 0, 1 << 30, 0, false},
		{"quiet after a burst", 100 << 20, 100<<20 + 1000, 0, true},
		{"quiet, trimmed since", 100 << 20, 100<<20 + 1000, 100 << 20, false},
		{"busy", 100 << 20, 100<<20 + quietAllocs, 0, false},
	} {
		if got := shouldTrimImage(c.last, c.allocs, c.trimmed); got != c.want {
			t.Errorf("%s: shouldTrimImage(%d, %d, %d) = %v, want %v", c.name, c.last, c.allocs, c.trimmed, got, c.want)
		}
	}
}

// TestReleaseWhenQuiet leaves 32 MiB of garbage collected but not
// returned (with the collector off, the runtime's own scavenger keeps it)
// and checks that the loop gives it back once the process is quiet.
func TestReleaseWhenQuiet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	debug.FreeOSMemory()
	garbage := make([][]byte, 32)
	for i := range garbage {
		garbage[i] = make([]byte, 1<<20)
	}
	garbage = nil
	runtime.GC()
	free := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	if f := free(); f < 16<<20 {
		t.Fatalf("free heap after dropping 32 MiB: %d bytes; the test cannot tell", f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { releaseWhenQuiet(ctx, 20*time.Millisecond); close(done) }()
	testkit.WaitFor(t, "the free heap returned", 5*time.Second, func() bool { return free() <= trimAbove })
	cancel()
	<-done
}
