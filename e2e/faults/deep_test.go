//go:build linux

package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// TestDeepNesting sends a call whose arguments nest 9,997 deep through a
// real `hindsight wrap`: the relay passes it, the daemon stores the step
// with its bodies truncated (size and hash kept), and the task becomes
// final when the sidecar exits.
func TestDeepNesting(t *testing.T) {
	home := plainHome(t)
	a := wrapFake(t, home)
	a.initialize()
	const depth = 9997
	args := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	a.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"deep","x":%s}}}`, args))
	if got := a.Recv(); !strings.Contains(got, `"id":1,"result"`) {
		t.Fatalf("deep call answered %.200s", got)
	}
	a.echoCalls("after", 1, 1, 10, 1)
	a.CloseInput()
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("hindsight wrap exited with %v", err)
	}
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()
	testkit.WaitFor(t, "the task to become final", time.Minute, func() bool {
		tasks, err := c.Tasks(context.Background(), daemon.TaskFilter{})
		return err == nil && len(tasks) == 1 && tasks[0].Final
	})
	tasks, _ := c.Tasks(context.Background(), daemon.TaskFilter{})
	task, err := c.Task(context.Background(), tasks[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var deep bool
	for _, s := range task.Steps {
		if s.Tool != "echo" || !strings.Contains(string(s.Request), "deep") {
			continue
		}
		deep = true
		fields := map[string]bool{}
		for _, tr := range s.Truncated {
			fields[tr.Field] = tr.OriginalSize > 2*depth && len(tr.SHA256) == 64
		}
		if !fields["arguments"] || !fields["request"] {
			t.Errorf("deep step stored with truncated %+v", s.Truncated)
		}
	}
	if !deep || len(task.Steps) < 3 {
		t.Fatalf("task has %d steps, the deep one found: %v", len(task.Steps), deep)
	}
	if st := status(t, home); len(st.Losses) != 1 || st.Losses[0].Truncated != 1 || st.Losses[0].Lost != 0 {
		t.Errorf("status losses = %+v, want one truncated step, none lost", st.Losses)
	}
}

// TestTooDeepAnsweredWithItsID: a request nested deeper than JSON readers
// accept (10,000 levels) cannot be relayed; the agent gets an error for its
// own id rather than a parse error with a null id it cannot match, and the
// session goes on.
func TestTooDeepAnsweredWithItsID(t *testing.T) {
	home := plainHome(t)
	a := wrapFake(t, home)
	a.initialize()
	const depth = 10005
	args := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	a.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"too-deep","method":"tools/call","params":{"name":"echo","arguments":{"x":%s}}}`, args))
	if got := a.Recv(); !strings.Contains(got, `"id":"too-deep"`) || !strings.Contains(got, `"code":-32600`) {
		t.Fatalf("too-deep call answered %.300s", got)
	}
	a.echoCalls("after", 1, 1, 10, 1)
	a.CloseInput()
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("hindsight wrap exited with %v", err)
	}
}
