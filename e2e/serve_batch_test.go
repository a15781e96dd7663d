//go:build unix

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestServeBatchRecorded: a JSON-RPC batch (protocol 2025-03-26) posted to
// the real `hindsight serve` in front of the reference server over
// Streamable HTTP is answered as the server answers it, and each of its
// calls is recorded as a step of its own.
func TestServeBatchRecorded(t *testing.T) {
	up := startEverything(t, "streamableHttp")
	home := testbin.HomeWith(t, relayOnly+"daemon:\n  idle_gap: 10m\n")
	side := serveIn(t, home, "--upstream", up+"/mcp") + "/mcp"

	post := func(sid, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, side, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-03-26")
		}
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d sid=%q %s", resp.StatusCode, sid, body)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp, body = post(sid, `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"batch-a"}}},`+
		`{"jsonrpc":"2.0","method":"notifications/x-unknown"},`+
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"batch-b"}}}]`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Echo: batch-a") || !strings.Contains(body, "Echo: batch-b") {
		t.Fatalf("batch: %d %s; want both echoes", resp.StatusCode, body)
	}

	c := daemon.NewClient(home + "/hindsight.sock")
	task := waitTask(t, c, func(_ bool, steps int) bool { return steps >= 3 }) // initialize and the two calls
	got, err := c.Task(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	echoed := map[string]int{}
	for _, s := range got.Steps {
		if s.Tool == "echo" {
			echoed[string(s.Arguments)]++
			if !strings.Contains(string(s.Result), "Echo: ") || s.SessionID != sid {
				t.Errorf("echo step %d: result %s, session %q", s.StepIndex, s.Result, s.SessionID)
			}
		}
	}
	if echoed[`{"message":"batch-a"}`] != 1 || echoed[`{"message":"batch-b"}`] != 1 {
		t.Errorf("echo steps by arguments: %v; want each call of the batch once", echoed)
	}
}
