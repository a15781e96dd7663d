package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/traces"
)

// decodeExport reads a `traces export` stream.
func decodeExport(t *testing.T, b []byte) []hindsight.Step {
	t.Helper()
	var steps []hindsight.Step
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s hindsight.Step
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, s)
	}
	return steps
}

func TestImportRoundTrip(t *testing.T) {
	ctx := context.Background()
	a := startServer(t, &Server{Tick: time.Hour})
	failed := tasktest.Stdio(tasktest.Step("fs", 2, time.Second), "s1", 100)
	failed.CausalTag, failed.IsError = hindsight.TagFailure, true
	recorded := []hindsight.Step{
		tasktest.Stdio(tasktest.Step("fs", 1, 0), "s1", 100),
		failed,
		tasktest.HTTP(tasktest.Step("web", 1, time.Hour), "h1"),
		tasktest.HTTP(tasktest.Step("web", 2, time.Hour+time.Second), "h1"),
		tasktest.Explicit(tasktest.Step("web", 3, 2*time.Hour), "my-task"),
	}
	if err := a.Deliver(ctx, recorded); err != nil {
		t.Fatal(err)
	}
	var exportA bytes.Buffer
	if err := a.Export(ctx, &exportA); err != nil {
		t.Fatal(err)
	}
	steps := decodeExport(t, exportA.Bytes())
	if len(steps) != len(recorded) {
		t.Fatalf("export has %d steps, want %d", len(steps), len(recorded))
	}

	b := startServer(t, &Server{Tick: time.Hour})
	res, err := b.ImportSteps(ctx, steps)
	if err != nil || res.Accepted != len(steps) || res.Duplicates != 0 {
		t.Fatalf("import = %+v, %v", res, err)
	}
	tasks1, err := b.Tasks(ctx, TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks1 {
		if task.ID != "my-task" && !task.Final {
			t.Errorf("imported task %s with closed sessions is not final", task.ID)
		}
	}
	var exportB bytes.Buffer
	if err := b.Export(ctx, &exportB); err != nil {
		t.Fatal(err)
	}
	if exportA.String() != exportB.String() {
		t.Fatalf("export → import → export differs:\n%s\n---\n%s", exportA.String(), exportB.String())
	}
	tasksA, _ := a.Tasks(ctx, TaskFilter{})
	if ids(tasksA) == nil || !reflect.DeepEqual(ids(tasksA), ids(tasks1)) {
		t.Fatalf("task ids: %v, imported %v", ids(tasksA), ids(tasks1))
	}

	// Importing again changes nothing, neither does importing into the
	// store the export came from.
	for name, c := range map[string]*Client{"again": b, "origin": a} {
		before, _ := c.Tasks(ctx, TaskFilter{})
		res, err := c.ImportSteps(ctx, steps)
		if err != nil || res.Accepted != 0 || res.Duplicates != len(steps) {
			t.Fatalf("%s: import = %+v, %v", name, res, err)
		}
		after, _ := c.Tasks(ctx, TaskFilter{})
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("%s: tasks changed:\n%+v\n%+v", name, before, after)
		}
	}
	var exportC bytes.Buffer
	if err := b.Export(ctx, &exportC); err != nil {
		t.Fatal(err)
	}
	if exportC.String() != exportA.String() {
		t.Fatal("re-import changed the export")
	}
}

func ids(tasks []hindsight.Task) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return out
}

func TestImportWithoutSource(t *testing.T) {
	ctx := context.Background()
	c := startServer(t, &Server{Tick: time.Hour})
	s0 := tasktest.Step("", 0, 0)
	s0.TaskID, s0.StepIndex = "t-old", 0
	s1 := tasktest.Step("", 0, time.Second)
	s1.TaskID, s1.StepIndex = "t-old", 1
	for i := 0; i < 2; i++ {
		res, err := c.ImportSteps(ctx, []hindsight.Step{s0, s1})
		if err != nil || res.Accepted+res.Duplicates != 2 || (i == 1) != (res.Duplicates == 2) {
			t.Fatalf("import %d = %+v, %v", i, res, err)
		}
	}
	task, err := c.Task(ctx, "t-old")
	if err != nil || len(task.Steps) != 2 || task.Steps[1].Source != traces.ImportSource("t-old") || task.Steps[1].Seq != 2 {
		t.Fatalf("task = %+v, %v", task, err)
	}
	// Neither a source nor a task id: refused as bad input.
	if _, err := c.ImportSteps(ctx, []hindsight.Step{tasktest.Step("", 0, 0)}); !errors.Is(err, ErrRejected) {
		t.Fatalf("err = %v, want ErrRejected", err)
	}
}
