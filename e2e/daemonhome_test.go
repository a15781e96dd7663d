package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// daemonHome starts exe's daemon in a new short home (testbin.Home),
// giving it up to within, and returns the home and a client of the
// daemon. When the test ends the daemon (whichever holds the lock by
// then) stops before its home goes.
func daemonHome(t *testing.T, exe string, within time.Duration) (hindsight.Home, *daemon.Client) {
	t.Helper()
	home := hindsight.Home(testbin.Home(t))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	c, err := daemon.EnsureRunning(ctx, home, exe)
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	return home, c
}
