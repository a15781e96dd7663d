package traces

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// TestMarkFinal: a task the agent says is finished is final at once; a
// later step of its group starts a new task, a late step that started
// before reopens it, and the next pass makes it final again.
func TestMarkFinal(t *testing.T) {
	ctx := context.Background()
	clk := tasktest.NewClock(t0.Add(time.Minute))
	st := openTestStore(t, t.TempDir(), clk)
	defer st.Close()
	ingest(t, st, stdio(step("a", 1, 0), "s1", 7), stdio(step("a", 2, time.Second), "s1", 7))
	id, err := st.TaskOfSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TaskOfSession(ctx, "nobody"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("unknown session: err = %v", err)
	}
	was, err := st.MarkFinal(ctx, id)
	if err != nil || was {
		t.Fatalf("MarkFinal = %v, %v", was, err)
	}
	if was, err := st.MarkFinal(ctx, id); err != nil || !was {
		t.Fatalf("MarkFinal again = %v, %v; want was final", was, err)
	}
	if _, err := st.MarkFinal(ctx, "t-none"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("unknown task: err = %v", err)
	}
	if unq, _ := st.Unqueued(ctx); !slices.Equal(unq, []string{id}) {
		t.Fatalf("unqueued = %v, want [%s]", unq, id)
	}
	// After the mark: a new task, though well within the idle gap.
	ingest(t, st, stdio(step("a", 3, 2*time.Minute), "s1", 7))
	pl := placement(t, st)
	if pl["a/3"][0] == id {
		t.Fatalf("a step after the end joined the ended task: %v", pl)
	}
	// A late step from before the mark reopens the task ...
	ingest(t, st, stdio(step("b", 1, 2*time.Second), "s2", 7))
	if pl := placement(t, st); pl["b/1"][0] != id {
		t.Fatalf("a late step went to %v, want %s", pl["b/1"][0], id)
	}
	task, _ := st.Task(ctx, id)
	if task.Final {
		t.Fatal("a late step left the task final")
	}
	// ... and the next pass makes it final again, without the idle gap.
	final, err := st.FinalizeIdle(ctx)
	if err != nil || !slices.Contains(final, id) {
		t.Fatalf("FinalizeIdle = %v, %v; want %s", final, err, id)
	}
}
