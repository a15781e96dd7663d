package traces

import (
	"context"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// TestReflectionSourceCapsLongTasks: a task within the bound is read
// whole; of a longer one reflection gets at most MaxSteps steps in step
// order: the first ones, each failure with the steps after it, the last
// ones.
func TestReflectionSourceCapsLongTasks(t *testing.T) {
	ctx := context.Background()
	ts := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	var steps []hindsight.Step
	failures := map[int]bool{300: true, 3000: true, 5000: true}
	for i := range 6000 {
		s := step("src", uint64(i+1), 0)
		s.ExplicitTask = "long"
		if failures[i] {
			s.IsError, s.ErrorCode, s.CausalTag = true, "E", hindsight.TagFailure
		}
		steps = append(steps, s)
	}
	short := step("src2", 1, 0)
	short.ExplicitTask = "short"
	for i := 0; i < len(steps); i += 500 {
		if _, err := ts.Ingest(ctx, steps[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ts.Ingest(ctx, []hindsight.Step{short}); err != nil {
		t.Fatal(err)
	}
	src := ReflectionSource{Traces: ts, MaxSteps: 400, Logger: quiet}

	whole, err := src.Task(ctx, "short")
	if err != nil || len(whole.Steps) != 1 {
		t.Fatalf("short task: %v, %v", whole, err)
	}
	task, err := src.Task(ctx, "long")
	if err != nil {
		t.Fatal(err)
	}
	if task.StepCount != 6000 || task.FailureCount != 3 {
		t.Errorf("step count %d, failures %d; want the stored 6000 and 3", task.StepCount, task.FailureCount)
	}
	if len(task.Steps) > 400 {
		t.Errorf("%d steps read, want at most 400", len(task.Steps))
	}
	got := map[int]bool{}
	for i, s := range task.Steps {
		if i > 0 && s.StepIndex <= task.Steps[i-1].StepIndex {
			t.Fatalf("steps out of order at %d: %d after %d", i, s.StepIndex, task.Steps[i-1].StepIndex)
		}
		got[s.StepIndex] = true
	}
	for _, want := range []int{0, 99, 300, 301, 303, 3000, 3003, 5000, 5003, 5900, 5999} {
		if !got[want] {
			t.Errorf("step %d not read", want)
		}
	}
	for _, not := range []int{100, 299, 304, 2999, 4000, 5899} {
		if got[not] {
			t.Errorf("step %d read; the window should leave it out", not)
		}
	}
}
