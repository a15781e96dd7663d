package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestSetMemoryLimit: the daemon takes MemoryBudget as its soft memory
// limit, unless GOMEMLIMIT was given, whose limit stays.
func TestSetMemoryLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })

	if got := SetMemoryLimit(false); got != MemoryBudget {
		t.Errorf("limit %d, want MemoryBudget %d", got, MemoryBudget)
	}
	debug.SetMemoryLimit(300 << 20) // what the runtime read from GOMEMLIMIT at start
	if got := SetMemoryLimit(true); got != 300<<20 {
		t.Errorf("limit %d with GOMEMLIMIT=300MiB, want %d", got, 300<<20)
	}
}

// TestLimitFor: a quarter above the live heap, in whole MB, never below
// the floor.
func TestLimitFor(t *testing.T) {
	for _, c := range []struct{ live, floor, want int64 }{
		{0, MemoryBudget, MemoryBudget},
		{40 << 20, MemoryBudget, MemoryBudget},
		{80 << 20, MemoryBudget, 100 << 20},
		{200<<20 + 1, MemoryBudget, 251 << 20},
	} {
		if got := limitFor(c.live, c.floor); got != c.want {
			t.Errorf("limitFor(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// TestFollowLiveHeap: the limit rises above a live heap larger than the
// floor and comes back to the floor once the heap is freed.
func TestFollowLiveHeap(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); FollowLiveHeap(ctx, 8<<20) }()
	defer func() { cancel(); <-done }()

	waitLimit := func(ok func(int64) bool, what string) {
		t.Helper()
		for i := 0; i < 400; i++ {
			runtime.GC()
			if ok(debug.SetMemoryLimit(-1)) {
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatalf("limit %d: never %s", debug.SetMemoryLimit(-1), what)
	}
	held := make([]byte, 64<<20)
	waitLimit(func(l int64) bool { return l >= 80<<20 }, "above a live heap of 64 MB")
	runtime.KeepAlive(held)
	held = nil
	waitLimit(func(l int64) bool { return l < 64<<20 }, "back below 64 MB once it was freed")
}
