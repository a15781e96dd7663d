package proxy

import (
	"testing"
	"time"
)

// TestRateLimitFlushes: events past the burst are not lost from the log:
// the next one let through, or else a flush once the next token is there,
// reports how many were dropped.
func TestRateLimitFlushes(t *testing.T) {
	flushed := make(chan int, 4)
	l := rateLimit{burst: 2, every: 20 * time.Millisecond, flush: func(n int) { flushed <- n }}
	var allowed, dropped int
	for range 5 {
		if ok, _ := l.allow(); ok {
			allowed++
		} else {
			dropped++
		}
	}
	if allowed < 2 || allowed+dropped != 5 {
		t.Fatalf("allowed %d, dropped %d", allowed, dropped)
	}
	if dropped > 0 {
		select {
		case n := <-flushed:
			if n != dropped {
				t.Fatalf("flush reported %d dropped, want %d", n, dropped)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the dropped events were never reported")
		}
	}
	l.stop()
}
