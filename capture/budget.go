package capture

import (
	"os"
	"runtime/debug"
)

// MemoryBudget is the soft memory limit (runtime/debug.SetMemoryLimit) of
// a stdio sidecar: what the Go runtime may hold before the collector runs
// regardless of GOGC. It is the sum of
//
//   - the capture queue's bound, DefaultMaxQueueBytes (4 MiB; beyond it
//     exchanges spill to disk, sealed);
//   - the outbox's steps in memory, DefaultMaxMemBytes (4 MiB; while the
//     daemon is behind, capture waits once they take half of it, so a
//     flood backs up into the queue and its sealed spill);
//   - the spill writer's intake (4 MiB, while the queue spills);
//   - the redactor's rules (~3 MB once gitleaks is loaded) and the
//     injector's tokenizer (~10 MB once an initialize result is counted);
//   - the relay's buffers, goroutine stacks and the runtime (~5 MB);
//
// and headroom of about a third for the collector. Peak RSS adds the
// binary's mapped pages (~8 MB) to it. A live heap above the limit (a
// huge message) is not an error: the collector then runs more often, its
// CPU capped by the runtime, and the heap grows as it must.
const MemoryBudget = 36 << 20

// SetMemoryLimit sets MemoryBudget as the process's soft memory limit
// unless GOMEMLIMIT is set in the environment (the runtime has applied it
// then), and returns the limit in force.
func SetMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(MemoryBudget)
	return MemoryBudget
}
