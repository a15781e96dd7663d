package traces

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// The step builders and the clock of tracestest, under the short names
// the tests use.
var (
	t0          = tasktest.T0
	step        = tasktest.Step
	stdio       = tasktest.Stdio
	httpStep    = tasktest.HTTP
	explicit    = tasktest.Explicit
	goldenSteps = tasktest.GoldenSteps
	compactStep = tasktest.CompactStep
	benchBatch  = tasktest.Batch
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openTestStore(t testing.TB, dir string, clk *tasktest.Clock) *Store {
	t.Helper()
	st, err := Open(dir, Options{IdleGap: 10 * time.Minute, Logger: quiet, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ingest(t *testing.T, st *Store, steps ...hindsight.Step) IngestResult {
	t.Helper()
	res, err := st.Ingest(context.Background(), steps)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// placement maps each ingested step (by source/seq) to its task and index.
func placement(t *testing.T, st *Store) map[string][2]any {
	t.Helper()
	out := map[string][2]any{}
	err := st.Steps(context.Background(), nil, func(s *hindsight.Step) error {
		out[fmt.Sprintf("%s/%d", s.Source, s.Seq)] = [2]any{s.TaskID, s.StepIndex}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
