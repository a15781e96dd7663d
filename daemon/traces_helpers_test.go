package daemon

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/traces"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// openTestStore opens a trace store in dir whose time is clk's.
func openTestStore(t testing.TB, dir string, clk *tasktest.Clock) *traces.Store {
	t.Helper()
	st, err := traces.Open(dir, traces.Options{IdleGap: 10 * time.Minute, Logger: quiet, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// storedSteps is how many steps st holds.
func storedSteps(t *testing.T, st *traces.Store) int {
	t.Helper()
	stats, err := st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return stats.Steps
}
