package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// TestJSONTaskMatchesPrintJSON: `traces show --json`, printed step by step,
// is byte for byte what printJSON prints of the whole task, with no step,
// one, or several (HTML characters and nested JSON among them).
func TestJSONTaskMatchesPrintJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, n := range []int{0, 1, 3} {
		task := hindsight.Task{ID: "t<1>", StartedAt: at, EndedAt: at, Final: true, Servers: []string{"fs"},
			StepCount: n, Reflection: "done"}
		for i := range n {
			task.Steps = append(task.Steps, hindsight.Step{TaskID: task.ID, StepIndex: i, Server: "fs", Method: "tools/call",
				Tool: "read", StartedAt: at, Arguments: json.RawMessage(fmt.Sprintf(`{"q":"a&b","n":[%d,{"x":1}]}`, i))})
		}
		var want, got bytes.Buffer
		if err := printJSON(&want, &task); err != nil {
			t.Fatal(err)
		}
		p := &jsonTask{w: &got}
		head := task
		head.Steps = nil
		if err := p.head(&head); err != nil {
			t.Fatal(err)
		}
		for i := range task.Steps {
			if err := p.step(&task.Steps[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.end(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d steps:\n got %s\nwant %s", n, got.String(), want.String())
		}
	}
}

// TestTextTaskPrintsEveryStep: the text table of a task longer than one
// aligned block has a row for every step, in order.
func TestTextTaskPrintsEveryStep(t *testing.T) {
	var out bytes.Buffer
	p := &textTask{w: &out}
	n := 2*textRows + 7
	if err := p.head(&hindsight.Task{ID: "long", StepCount: n}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := p.step(&hindsight.Step{StepIndex: i, Server: "fs", Method: "tools/call"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.end(); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == fmt.Sprint(rows) && strings.Contains(line, "tools/call") {
			rows++
		}
	}
	if rows != n {
		t.Errorf("%d step rows in order, want %d", rows, n)
	}
}
