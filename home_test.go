package hindsight

import "testing"

// TestDefaultHome: the default home is the system's, whatever
// HINDSIGHT_HOME says (the command line reads that).
func TestDefaultHome(t *testing.T) {
	t.Setenv("HINDSIGHT_HOME", "/some/where")
	if got := DefaultHome(); got == "" || got == "/some/where" {
		t.Fatalf("DefaultHome() = %q", got)
	}
}
