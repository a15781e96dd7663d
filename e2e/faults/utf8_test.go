//go:build linux

package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestInvalidUTF8Export relays a call whose arguments hold invalid UTF-8
// inside a JSON string through a real `hindsight wrap`: the server gets
// the bytes as sent, and `hindsight traces export` and `traces show --json`
// are valid UTF-8 JSON, the step counting the replacement as a redaction.
func TestInvalidUTF8Export(t *testing.T) {
	home := plainHome(t)
	a := wrapFake(t, home)
	a.initialize()
	a.Send("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"bad-\xff\xfe-bytes\"}}}")
	if got := a.Recv(); !strings.Contains(got, `"id":1,"result"`) {
		t.Fatalf("answered %s", got)
	}
	a.CloseInput()
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("hindsight wrap exited with %v", err)
	}
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()
	var taskID string
	testkit.WaitFor(t, "the step to be stored", time.Minute, func() bool {
		tasks, err := c.Tasks(context.Background(), daemon.TaskFilter{})
		if err != nil || len(tasks) != 1 || tasks[0].StepCount < 2 {
			return false
		}
		taskID = tasks[0].ID
		return true
	})
	run := func(args ...string) []byte {
		cmd := exec.Command(testbin.Hindsight(t), args...)
		cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hindsight %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	export := run("traces", "export")
	if !utf8.Valid(export) {
		t.Fatalf("traces export is not valid UTF-8: %q", export)
	}
	var found bool
	sc := bufio.NewScanner(bytes.NewReader(export))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var s struct {
			Tool       string          `json:"tool"`
			Arguments  json.RawMessage `json:"arguments"`
			Redactions int             `json:"redactions"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("export line is not JSON: %v: %q", err, sc.Bytes())
		}
		if s.Tool == "echo" {
			found = true
			if !strings.Contains(string(s.Arguments), "bad-\uFFFD-bytes") || s.Redactions < 1 {
				t.Errorf("echo step: arguments %s, redactions %d", s.Arguments, s.Redactions)
			}
		}
	}
	if !found {
		t.Fatalf("no echo step in the export:\n%s", export)
	}
	if show := run("traces", "show", taskID, "--json"); !utf8.Valid(show) || !json.Valid(show) {
		t.Fatalf("traces show --json is not valid UTF-8 JSON: %q", show)
	}
}
