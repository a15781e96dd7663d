package testkit

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing the test with what when it
// still does not after within. It is a deadline, not a measured time: cond
// is what the test asserts. It polls every six-hundredth of within (100
// ms for a minute), no more often than every 5 ms.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	every := max(within/600, 5*time.Millisecond)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", within, what)
		}
		time.Sleep(every)
	}
}

// WaitGone waits up to 20 s for process pid to exit (a zombie counts as
// gone), failing the test when it does not.
func WaitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ProcessGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
