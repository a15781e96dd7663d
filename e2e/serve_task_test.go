//go:build unix

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestServeDeleteEndsTask: an agent that DELETEs its Streamable HTTP
// session through `hindsight serve` makes the session's task final at
// once, long before the idle gap (10 minutes here) would.
// testClient turns a stuck exchange into a failure instead of a hang.
var testClient = &http.Client{Timeout: 2 * time.Minute}

// initBody is an initialize request.
const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func TestServeDeleteEndsTask(t *testing.T) {
	up := startEverything(t, "streamableHttp")
	home := testbin.HomeWith(t, relayOnly+"daemon:\n  idle_gap: 10m\n")
	side := serveIn(t, home, "--upstream", up+"/mcp")

	post := func(sid, body string) (*http.Response, string) {
		t.Helper()
		return mcpPost(t, testClient, side+"/mcp", sid, body)
	}
	resp, body := post("", initBody)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d sid=%q %s", resp.StatusCode, sid, body)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp, body = post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`); !strings.Contains(body, "hello") {
		t.Fatalf("tools/call: %d %s", resp.StatusCode, body)
	}

	// The task is recorded and open while the session lives.
	c := daemon.NewClient(home + "/hindsight.sock")
	ctx := context.Background()
	task := waitTask(t, c, func(final bool, steps int) bool { return steps >= 2 })
	if task.Final {
		t.Fatalf("task %s final while its session is open", task.ID)
	}

	mcpDelete(t, testClient, side+"/mcp", sid)
	final := waitTask(t, c, func(final bool, _ int) bool { return final })
	if final.ID != task.ID {
		t.Fatalf("task %s became final, want %s", final.ID, task.ID)
	}
	got, err := c.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var echoed bool
	for _, s := range got.Steps {
		if s.SessionID != sid {
			t.Errorf("step %d of session %q, want %q", s.StepIndex, s.SessionID, sid)
		}
		echoed = echoed || s.Tool == "echo"
	}
	if !echoed {
		t.Errorf("the final task has no echo step: %+v", got.Steps)
	}
}

// waitTask waits up to 30 s (far less than the idle gap) for the only
// task of c's daemon to satisfy ok.
func waitTask(t *testing.T, c *daemon.Client, ok func(final bool, steps int) bool) hindsight.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last []hindsight.Task
	for time.Now().Before(deadline) {
		tasks, err := c.Tasks(context.Background(), daemon.TaskFilter{})
		if err == nil {
			last = tasks
			if len(tasks) > 1 {
				t.Fatalf("%d tasks, want 1: %+v", len(tasks), tasks)
			}
			if len(tasks) == 1 && ok(tasks[0].Final, tasks[0].StepCount) {
				return tasks[0]
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no task as wanted after 30 s; tasks: %+v", last)
	return hindsight.Task{}
}

// serveIn runs `hindsight serve --listen 127.0.0.1:0 args…` with home and
// returns its base URL.
func serveIn(t *testing.T, home string, args ...string) string {
	t.Helper()
	p := startProcess(t, []string{"HINDSIGHT_HOME=" + home}, testbin.Hindsight(t),
		append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	return awaitListening(t, p)
}
