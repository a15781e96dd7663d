package daemon

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// replayQueue is a recordingQueue that can replay reflection.
type replayQueue struct {
	recordingQueue
	got []string
}

func (q *replayQueue) ReplayReflection(ctx context.Context, req ReflectReplayRequest, tasks []string, progress func(done, total int)) (*ReflectPlan, error) {
	q.got = tasks
	for i := range tasks {
		progress(i+1, len(tasks))
	}
	return &ReflectPlan{DryRun: req.DryRun, Tasks: len(tasks), Changes: []PlannedChange{{Task: "x", Outcome: "added"}}}, nil
}

func TestAPIReflectReplay(t *testing.T) {
	ctx := context.Background()
	none := startServer(t, &Server{})
	var ae *APIError
	if _, err := none.ReflectReplay(ctx, ReflectReplayRequest{}, nil); !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("without reflection: err = %v, want 503", err)
	}

	q := &replayQueue{}
	c := startServer(t, &Server{Queue: q, Tick: time.Hour})
	steps := []hindsight.Step{tasktest.Stdio(tasktest.Step("a", 1, 0), "s1", 1), tasktest.Stdio(tasktest.Step("b", 1, 24*time.Hour), "s2", 2), tasktest.Stdio(tasktest.Step("c", 1, 48*time.Hour), "s3", 3)}
	if err := c.Deliver(ctx, steps); err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{"s1", "s2", "s3"} {
		if _, err := c.CloseSession(ctx, sid, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	tasks, _ := c.Tasks(ctx, TaskFilter{})
	if len(tasks) != 3 {
		t.Fatalf("tasks %+v", tasks)
	}
	var progress []int
	since := tasktest.T0.Add(12 * time.Hour)
	plan, err := c.ReflectReplay(ctx, ReflectReplayRequest{Since: &since, DryRun: true}, func(done, total int) { progress = append(progress, done) })
	if err != nil || !plan.DryRun || plan.Tasks != 2 || len(plan.Changes) != 1 {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	// Oldest first, from --since on.
	if want := []string{tasks[1].ID, tasks[0].ID}; !slices.Equal(q.got, want) || !slices.Equal(progress, []int{1, 2}) {
		t.Errorf("tasks %v (want %v), progress %v", q.got, want, progress)
	}
	if _, err := c.ReflectReplay(ctx, ReflectReplayRequest{TaskIDs: []string{"no-such-task"}}, nil); !errors.Is(err, hindsight.ErrNotFound) {
		t.Errorf("unknown task: err = %v", err)
	}
}
