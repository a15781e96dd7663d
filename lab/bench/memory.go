//go:build linux

package bench

import (
	"time"
)

// Memory is a process's resident memory at one moment: RSS (VmRSS) and
// its private part, Anon (RssAnon: heap, stacks, buffers). The rest is
// file pages, mostly the binary's, which every process running the same
// binary shares.
type Memory struct {
	RSS, Anon int64
}

// ReadMemory reads pid's resident memory from /proc.
func ReadMemory(pid int) (Memory, error) {
	rss, err := ProcStatus(pid, "VmRSS")
	if err != nil {
		return Memory{}, err
	}
	anon, err := ProcStatus(pid, "RssAnon")
	return Memory{RSS: rss, Anon: anon}, err
}

// restDelay is how long Run lets the processes rest after the last
// measurement before it reads their memory at rest.
const restDelay = 5 * time.Second

// peakAnon reads pid's private resident memory every interval until stop
// is closed, and returns the highest value read (0 when none could be).
// The kernel keeps a peak of the whole RSS only (VmHWM), whose file pages
// are shared with every process of the same binary.
func peakAnon(pid int, interval time.Duration, stop <-chan struct{}) int64 {
	t := time.NewTicker(interval)
	defer t.Stop()
	var peak int64
	for {
		if v, err := ProcStatus(pid, "RssAnon"); err == nil {
			peak = max(peak, v)
		}
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}

// sampleAnon starts peakAnon for pid and returns a function that stops it
// and returns the peak.
func sampleAnon(pid int) func() int64 {
	stop := make(chan struct{})
	done := make(chan int64, 1)
	go func() { done <- peakAnon(pid, 10*time.Millisecond, stop) }()
	return func() int64 {
		close(stop)
		return <-done
	}
}
