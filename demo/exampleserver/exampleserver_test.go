package exampleserver

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect runs the server over a pair of OS pipes, as on stdio, and returns
// a client session of the official go-sdk (the independent implementation)
// to it.
func connect(t *testing.T, opt Options) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cr, sw, err := os.Pipe() // server → client
	if err != nil {
		t.Fatal(err)
	}
	sr, cw, err := os.Pipe() // client → server
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ServeWith(ctx, opt, sr, sw) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
		sr.Close()
		sw.Close()
	})
	return cs
}

type call struct {
	tool    string
	args    map[string]any
	isError bool
	text    string // a substring of the first text item
}

func run(t *testing.T, cs *mcp.ClientSession, calls []call) {
	t.Helper()
	for i, c := range calls {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("call %d %s: protocol error %v", i, c.tool, err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if res.IsError != c.isError || !strings.Contains(text, c.text) {
			t.Fatalf("call %d %s(%v) = isError %v %q, want isError %v containing %q", i, c.tool, c.args, res.IsError, text, c.isError, c.text)
		}
	}
}

func login() call {
	return call{"login", map[string]any{"user": "demo", "password": "hunter2"}, false, "Logged in as demo"}
}

func TestTraps(t *testing.T) {
	tests := []struct {
		name  string
		calls []call
	}{
		{"login first", []call{
			{"fetch_report", map[string]any{"month": "2026-03"}, true, "401 Unauthorized: no active session. Call login first."},
			{"create_invoice", map[string]any{"customer": "Acme GmbH", "amount": 1.0, "due_date": "2026-04-15"}, true, "401 Unauthorized"},
			login(),
			{"fetch_report", map[string]any{"month": "2026-03"}, false, "Acme GmbH: 1420.50 EUR"},
		}},
		{"date format", []call{
			login(),
			{"create_invoice", map[string]any{"customer": "Acme GmbH", "amount": 1420.5, "due_date": "04/15/2026"}, true, `400 Bad Request: invalid due_date "04/15/2026": expected YYYY-MM-DD`},
			{"create_invoice", map[string]any{"customer": "Acme GmbH", "amount": 1420.5, "due_date": "2026-02-30"}, true, "expected YYYY-MM-DD"},
			{"create_invoice", map[string]any{"customer": "Acme GmbH", "amount": 1420.5, "due_date": "2026-04-15"}, false, "Created invoice INV-0001"},
		}},
		{"rate limit with a pause", []call{
			login(),
			{"create_invoice", map[string]any{"customer": "Acme GmbH", "amount": 1420.5, "due_date": "2026-04-15"}, false, "INV-0001"},
			{"send_invoice", map[string]any{"invoice_id": "INV-0001"}, true, "429 Too Many Requests: send_invoice is rate limited. Retry after 500 ms, or pass pause_ms=500"},
			{"send_invoice", map[string]any{"invoice_id": "INV-0001", "pause_ms": 500}, false, "Sent invoice INV-0001 to Acme GmbH"},
			{"send_invoice", map[string]any{"invoice_id": "INV-0001"}, true, "429"},
			{"send_invoice", map[string]any{"invoice_id": "INV-0001", "pause_ms": 5}, true, "429"},
		}},
		{"bad input", []call{
			{"send_invoice", map[string]any{"invoice_id": "INV-9"}, true, "404 Not Found"},
			{"send_invoice", map[string]any{"invoice_id": "INV-9", "pause_ms": 60000}, true, "400 Bad Request: pause_ms"},
			{"login", map[string]any{"user": "", "password": "x"}, true, "400 Bad Request"},
			login(),
			{"fetch_report", map[string]any{"month": "March"}, true, "expected YYYY-MM"},
			{"create_invoice", map[string]any{"customer": "A", "amount": -1, "due_date": "2026-04-15"}, true, "positive"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Long enough that a loaded machine's round trips (the 5 ms
			// pause's call must still find the limit) stay far inside it.
			run(t, connect(t, Options{RetryAfter: 500 * time.Millisecond}), tt.calls)
		})
	}
}

func TestRateLimitRetryAfterWaiting(t *testing.T) {
	cs := connect(t, Options{RetryAfter: 20 * time.Millisecond})
	run(t, cs, []call{
		login(),
		{"create_invoice", map[string]any{"customer": "Acme GmbH", "amount": 2.0, "due_date": "2026-04-15"}, false, "INV-0001"},
		{"send_invoice", map[string]any{"invoice_id": "INV-0001"}, true, "429"},
	})
	time.Sleep(25 * time.Millisecond) // what the 429 asked for
	run(t, cs, []call{{"send_invoice", map[string]any{"invoice_id": "INV-0001"}, false, "Sent invoice"}})
}

func TestStateIsPerConnection(t *testing.T) {
	run(t, connect(t, Options{}), []call{login()})
	run(t, connect(t, Options{}), []call{{"fetch_report", map[string]any{"month": "2026-03"}, true, "401"}})
}

func TestListing(t *testing.T) {
	cs := connect(t, Options{})
	if got := cs.InitializeResult().Instructions; got != Instructions {
		t.Errorf("instructions %q", got)
	}
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		if !json.Valid(b) || !strings.Contains(string(b), `"required"`) {
			t.Errorf("%s: schema %s", tool.Name, b)
		}
	}
	if strings.Join(names, ",") != "create_invoice,fetch_report,login,send_invoice" {
		t.Errorf("tools %v", names)
	}
}

func TestStructuredErrors(t *testing.T) {
	cs := connect(t, Options{})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fetch_report", Arguments: map[string]any{"month": "2026-03"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !res.IsError || string(b) != `{"error":"unauthorized","status":401}` {
		t.Fatalf("isError %v structuredContent %s", res.IsError, b)
	}
}
