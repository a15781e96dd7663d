//go:build linux

package faults

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// vmHWM returns the peak resident set size of pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestLargeMessageMemory relays 20 MiB messages through a real `hindsight
// wrap` (capture on) and reports the sidecar's peak RSS (VmHWM) after each,
// in a fresh sidecar: a 20 MiB result for a small call, then a 20 MiB call
// echoed back. The relay's memory for a message of size S must stay near
// 2×S plus a constant: the bound checked is 2×S plus the sidecar's peak
// before the call plus 16 MiB for the result, and the same plus S for the
// echo, whose request the sidecar holds (in flight, then queued for
// capture) while the answer of size S is read.
func TestLargeMessageMemory(t *testing.T) {
	const size = 20 << 20
	for _, tc := range []struct {
		name string
		call string
		held int64 // messages of size S alive besides the one read
	}{
		{"result", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"size":` + strconv.Itoa(size) + `}}}`, 0},
		{"echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("y", size) + `"}}}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := plainHome(t)
			if p := os.Getenv("FAULTS_MEMPROFILE"); p != "" {
				t.Setenv("HINDSIGHT_MEMPROFILE", p+"."+tc.name) // the sidecar writes a heap profile there at exit
			}
			a := wrapFake(t, home)
			a.initialize()
			a.echoCalls("warm", 0, 20, 4096, 1)
			base := vmHWM(t, a.cmd.Process.Pid)
			a.Send(tc.call)
			if got := a.Recv(); len(got) < size || !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result"`) {
				t.Fatalf("answered %.200s (%d bytes)", got, len(got))
			}
			a.echoCalls("after", 1000, 1, 10, 1)
			peak := vmHWM(t, a.cmd.Process.Pid)
			t.Logf("%s: sidecar peak RSS %.1f MB before, %.1f MB after (S = %.1f MB): %.2f×S over the peak before",
				tc.name, float64(base)/1e6, float64(peak)/1e6, float64(size)/1e6, float64(peak-base)/size)
			// A guard against gross regressions, with room for a loaded
			// machine whose collector lags (the figures above are what to
			// read): 2×S (+S per message held) + S/2 + 32 MB.
			if limit := base + (2+tc.held)*size + size/2 + 32<<20; peak > limit {
				t.Errorf("peak RSS %.1f MB over %d.5×S + %.1f MB (%.1f MB)", float64(peak)/1e6, 2+tc.held, float64(base+32<<20)/1e6, float64(limit)/1e6)
			}
		})
	}
}
