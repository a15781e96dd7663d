package proxy_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// event is one server-sent event as an agent reads it.
type event struct{ id, retry, name, data string }

// readEvents reads events from r until stop returns true or the stream ends.
func readEvents(t *testing.T, r io.Reader, stop func(event) bool) []event {
	t.Helper()
	var out []event
	var ev event
	fields := false
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if fields {
				out = append(out, ev)
				if stop(ev) {
					return out
				}
			}
			ev, fields = event{}, false
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			ev.id = value
		case "retry":
			ev.retry = value
		case "event":
			ev.name = value
		case "data":
			ev.data += value
		default:
			continue
		}
		fields = true
	}
	return out
}

// resumableUpstream serves a go-sdk server with an event store and a tool
// that closes its request stream before it answers (SEP-1699 polling), as
// the conformance suite's test_reconnection does.
func resumableUpstream(t *testing.T) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "resumable", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "test_reconnection", Description: "closes the stream, then answers"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 20 * time.Millisecond})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "after the reconnect"}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	return up
}

// TestHTTPResumeThroughProxy checks SEP-1699 polling through the sidecar
// with an HTTP upstream: the upstream's priming event and retry field
// reach the agent, the POST stream ends without the response when the
// upstream closes it, and a GET with the last event id resumes it, the
// response arriving there (and recorded as a step that succeeded).
func TestHTTPResumeThroughProxy(t *testing.T) {
	up := resumableUpstream(t)
	rec := newSteps(t)
	h := &proxy.HTTPHandler{Upstream: &proxy.HTTPUpstream{URL: up.URL}, Server: "r", Hooks: rec.hooks(), Logger: quietLogger()}
	side := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); side.Close() })
	url := side.URL + "/mcp"
	v := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	sid := initialize(t, url, nil)
	postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), v).Body.Close()

	resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_reconnection","arguments":{}}}`), v)
	evs := readEvents(t, resp.Body, func(event) bool { return false })
	resp.Body.Close()
	if len(evs) == 0 || evs[0].id == "" || evs[0].data != "" {
		t.Fatalf("POST stream %+v: want a priming event (an id, empty data) first", evs)
	}
	last, retry := "", ""
	for _, ev := range evs {
		if ev.id != "" {
			last = ev.id
		}
		if ev.retry != "" {
			retry = ev.retry
		}
		if gjson.Get(ev.data, "id").Raw == "7" {
			t.Fatalf("the response came on the POST stream (%+v); the upstream closed it first", evs)
		}
	}
	if retry != "20" {
		t.Errorf("retry %q on the POST stream, want the upstream's 20", retry)
	}

	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", last)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs = readEvents(t, resp.Body, func(ev event) bool { return gjson.Get(ev.data, "id").Raw == "7" })
	if len(evs) == 0 || gjson.Get(evs[len(evs)-1].data, "result.content.0.text").Str != "after the reconnect" {
		t.Fatalf("resumed stream (status %d) %+v: want the response to 7", resp.StatusCode, evs)
	}
	if ex := rec.only("tools/call"); failed(ex) || gjson.GetBytes(ex.Response, "id").Raw != "7" {
		t.Errorf("recorded %s (failure %q), want the response as a success", ex.Response, ex.Failure)
	}
}

// TestHTTPResumeGoSDKClient calls the tool through the sidecar with the
// go-sdk client, which reconnects by itself when the stream closes.
func TestHTTPResumeGoSDKClient(t *testing.T) {
	up := resumableUpstream(t)
	h := &proxy.HTTPHandler{Upstream: &proxy.HTTPUpstream{URL: up.URL}, Server: "r", Logger: quietLogger()}
	side := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); side.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: side.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_reconnection"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "after the reconnect" {
		t.Fatalf("result %+v", res.Content)
	}
}
