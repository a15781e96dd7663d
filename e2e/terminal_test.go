//go:build unix

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileName changes the terminal's title, rings its bell and clears the
// screen, with C0 and C1 controls both.
const hostileName = "ev\x1b]0;pwned\x07il\x1b[2J\u009b2J\u009d0;x\a"

// TestEndToEndNoControlSequencesPrinted: a server name, a task id a client
// set in _meta, a tool name and a lesson, each carrying control sequences,
// reach the daemon through the real sidecar and an import; no output of
// `traces list`, `traces show`, `experiences list` or `experiences search`
// holds a raw ESC, BEL or C1 control.
func TestEndToEndNoControlSequencesPrinted(t *testing.T) {
	e := newEnv(t)
	e.seed(t, hindsight.Experience{Server: "example", Tool: "fetch" + hostileName, ErrorCode: "401",
		Situation: "fetch_report failed " + hostileName, Lesson: "Call login before fetch_report " + hostileName})
	cmd := exec.Command(e.exe, "wrap", "--name", hostileName, "--", e.exe, "example-server")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(e.home), "HINDSIGHT_TASK_ID=e2e-terminal")
	cmd.Stderr = os.Stderr
	cs := e.connect(t, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"fetch_report", "no_such" + hostileName} {
		params := &mcp.CallToolParams{Name: name, Arguments: map[string]any{"month": "2026-03"},
			Meta: mcp.Meta{"io.hindsight/task": "task" + hostileName}}
		if _, err := cs.CallTool(ctx, params); err != nil {
			t.Logf("call %q: %v", name, err) // an unknown tool may fail as a protocol error
		}
	}
	cs.Close()
	var tasks []hindsight.Task
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list, err := e.client.Tasks(ctx, daemon.TaskFilter{})
		if err != nil {
			t.Fatal(err)
		}
		steps := 0
		for _, task := range list {
			steps += task.StepCount
		}
		if steps >= 3 {
			tasks = list
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks %+v: the calls were not recorded", list)
		}
	}
	outputs := [][]string{{"traces", "list"}, {"experiences", "list"}, {"experiences", "search", "fetch_report"},
		{"experiences", "search", "login", "--explain"}}
	sawTool := false
	for _, task := range tasks {
		if strings.ContainsAny(task.ID, "\x1b\x07") {
			t.Errorf("task id %q kept its control characters", task.ID)
		}
		outputs = append(outputs, []string{"traces", "show", task.ID})
		full, err := e.client.Task(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range full.Steps {
			sawTool = sawTool || strings.HasPrefix(s.Tool, "no_such")
			if strings.ContainsAny(s.Tool+s.Server, "\x1b\x07") {
				t.Errorf("step %d: tool %q, server %q kept their control characters", s.StepIndex, s.Tool, s.Server)
			}
		}
	}
	if !sawTool {
		t.Error("the call of the hostile tool name was not recorded")
	}
	for _, args := range outputs {
		out, err := exec.Command(e.exe, append([]string{"--home", string(e.home)}, args...)...).CombinedOutput()
		if err != nil {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
		if i := bytes.IndexFunc(out, func(r rune) bool { return r == 0x1b || r == 0x07 || (r >= 0x80 && r < 0xa0) }); i >= 0 {
			t.Errorf("%v printed a control character at %d:\n%q", args, i, out)
		}
		if args[1] == "show" && !bytes.Contains(out, []byte("evil2J")) {
			t.Errorf("%v does not name the server, cleaned:\n%s", args, out)
		}
	}
}
