package daemon

import (
	"context"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
)

// heapCheck is how often FollowLiveHeap reads the live heap.
const heapCheck = 250 * time.Millisecond

// FollowLiveHeap keeps the soft memory limit at a quarter above the live
// heap (what the last collection kept), and never below floor, until ctx
// ends. A fixed limit below the live heap (MemoryBudget under a store of
// 100k experiences, or an import that holds its pack) makes the runtime
// collect without pause and return pages as soon as it freed them; above
// it, a collection comes after a quarter of the live heap was allocated.
func FollowLiveHeap(ctx context.Context, floor int64) {
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(heapCheck)
	defer t.Stop()
	set := int64(-1)
	for {
		rtmetrics.Read(sample)
		if sample[0].Value.Kind() == rtmetrics.KindUint64 {
			if l := limitFor(int64(sample[0].Value.Uint64()), floor); l != set {
				debug.SetMemoryLimit(l)
				set = l
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// limitFor is the soft memory limit for a live heap of live bytes: a
// quarter above it, at least floor, in whole MB (so that small moves of
// the heap leave it be).
func limitFor(live, floor int64) int64 {
	l := live + live/4
	l = (l + 1<<20 - 1) &^ (1<<20 - 1)
	return max(l, floor)
}
