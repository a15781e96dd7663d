package daemon

import (
	"runtime/debug"
	"testing"
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
