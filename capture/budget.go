package capture

import (
	"os"
	"runtime/debug"
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
//   - the redactor's rules, once gitleaks is loaded.
//
// The rest of a sidecar's heap is the relay's buffers, the runtime, and
// the injector's tokenizer. The limit sits well above their sum: a limit
// near the live heap makes the collector run without pause (bench/README.md
// has the figures), so it trims the collector's headroom under a flood
// rather than the heap itself. A live heap above it (a huge message) is not
// an error: the collector then runs more often and the heap grows as it
// must.
const MemoryBudget = 64 << 20

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
