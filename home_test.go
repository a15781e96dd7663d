package hindsight

import "testing"

func TestDefaultHomeFollowsEnv(t *testing.T) {
	t.Setenv("HINDSIGHT_HOME", "/some/where")
	if got := DefaultHome(); got != "/some/where" {
		t.Fatalf("DefaultHome() = %q", got)
	}
	t.Setenv("HINDSIGHT_HOME", "")
	if got := DefaultHome(); got == "" {
		t.Fatal("DefaultHome() is empty without HINDSIGHT_HOME")
	}
}
