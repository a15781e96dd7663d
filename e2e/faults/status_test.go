//go:build linux

package faults

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// TestStatusDeadDaemon kills the daemon (SIGKILL, as the kernel's SIGBUS
// did): status --json says it is not running, and how to recover, instead
// of showing a stale pid as if it ran.
func TestStatusDeadDaemon(t *testing.T) {
	home := plainHome(t)
	a := wrapFake(t, home)
	a.initialize()
	a.echoCalls("x", 0, 1, 10, 1)
	a.CloseInput()
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("hindsight wrap exited with %v", err)
	}
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(h.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the daemon to die", time.Minute, func() bool { return testkit.ProcessGone(h.PID) })
	st := status(t, home)
	if st.Running || st.Daemon != nil || !strings.Contains(st.Hint, "died") || !strings.Contains(st.Hint, "daemon.log") {
		t.Fatalf("status of a dead daemon: running %v, daemon %+v, hint %q", st.Running, st.Daemon, st.Hint)
	}
	if _, err := os.Stat(home.Path("daemon.lock")); err != nil {
		t.Fatal(err)
	}
}
