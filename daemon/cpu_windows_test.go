//go:build windows

package daemon

import (
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// cpuTime is the CPU time the process has used: the benchmark's and its
// background work's (Badger's flushes and compactions).
func cpuTime(b *testing.B) time.Duration {
	var creation, exit, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &creation, &exit, &kernel, &user); err != nil {
		b.Fatal(err)
	}
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}
