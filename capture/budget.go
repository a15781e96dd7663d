package capture

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/hindsight-proxy/hindsight/internal/imagetrim"
)

// MemoryBudget is the soft memory limit (runtime/debug.SetMemoryLimit) of
// a stdio sidecar: past it the collector runs regardless of GOGC. Under a
// flood of calls capture's share of the heap is bounded by design:
//
//   - the capture queue, DefaultMaxQueueBytes (built steps included;
//     beyond it exchanges spill to disk, sealed);
//   - the spill writer's intake (spillQueueBytes, beyond which exchanges
//     are dropped; in practice near empty, as sealing and appending an
//     exchange costs far less than relaying it);
//   - the outbox's steps in memory, DefaultMaxMemBytes (while the daemon
//     is behind, capture waits once they take half of it);
//   - the redactor's rules: gitleaks' rule file, decoded on the first text
//     holding one of its keywords, and each rule compiled on the first
//     text holding one of its own.
//
// The rest of a sidecar's heap is the relay's buffers, the runtime, the
// outbox's database while one is open (its memtables), and the injector's
// tokenizer. The limit sits about twice above the live heap under a flood
// of calls: a limit near the live heap makes the collector run without
// pause (lab/bench/README.md has the figures), so it trims the collector's
// headroom under a flood rather than the heap itself. A live heap above it (a huge message) is not
// an error: the collector then runs more often and the heap grows as it
// must.
const MemoryBudget = 28 << 20

// SetMemoryLimit sets MemoryBudget as the process's soft memory limit
// unless GOMEMLIMIT is set in the environment (the runtime has applied it
// then), and returns the limit in force. It reads GOMEMLIMIT itself: the
// variable is the Go runtime's, read by the runtime of this process at
// its start, so whether it is set is a fact about the process, not
// configuration the command line could pass down.
func SetMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(MemoryBudget)
	return MemoryBudget
}

// quietAllocs is how much a process may allocate in a quietInterval and
// still count as quiet; trimAbove how much free heap it must hold, not yet
// returned to the system, for ReleaseWhenQuiet to return it.
const (
	quietInterval = time.Second
	quietAllocs   = 256 << 10
	trimAbove     = 4 << 20
)

// ReleaseWhenQuiet returns the heap a burst left free to the system once
// the process is quiet, until ctx is done. Under a flood the heap grows
// toward MemoryBudget; afterwards the runtime gives the free part back
// only slowly (its scavenger paces itself on the heap goal, which stays
// where the flood left it until the next collection, and a quiet sidecar
// allocates too little to start one). Each quietInterval it reads the
// runtime's figures (no stop-the-world); when the process allocated less
// than quietAllocs since the last look and more than trimAbove of heap is
// free and not yet returned, it collects and returns it
// (debug.FreeOSMemory: a few milliseconds of CPU, once per burst). Quiet
// after more than trimAbove was allocated since it last did, it drops the
// executable's pages from the resident set (imagetrim.Trim: they stay in
// the page cache), whether or not the heap was worth returning.
func ReleaseWhenQuiet(ctx context.Context) { releaseWhenQuiet(ctx, quietInterval) }

func releaseWhenQuiet(ctx context.Context, interval time.Duration) {
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last, trimmed uint64 // allocs at the last look, and at the last image trim
	for {
		metrics.Read(samples)
		allocs, free := sampleUint(samples[0]), sampleUint(samples[1])
		if shouldRelease(last, allocs, free) {
			debug.FreeOSMemory()
			metrics.Read(samples)
			allocs = sampleUint(samples[0])
		}
		if shouldTrimImage(last, allocs, trimmed) {
			imagetrim.Trim()
			trimmed = allocs
		}
		last = allocs
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// shouldRelease reports whether a process that had allocated last bytes
// at the previous look and allocs now (both 0 before the first look),
// holding free bytes of heap not returned, is quiet and worth trimming.
func shouldRelease(last, allocs, free uint64) bool {
	return last != 0 && allocs-last < quietAllocs && free > trimAbove
}

// shouldTrimImage reports whether a process that had allocated last
// bytes at the previous look (0 before the first), allocs now and trimmed
// at its last image trim (0 before the first) is quiet after a burst.
func shouldTrimImage(last, allocs, trimmed uint64) bool {
	return last != 0 && allocs-last < quietAllocs && allocs-trimmed > trimAbove
}

func sampleUint(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}
