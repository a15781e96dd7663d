package proxy_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestHTTPCommandCancelEndsStream: the agent cancels a request whose
// stream the sidecar is the origin of (a command upstream); the stream
// ends at once, without a response, rather than when the slow tool would
// have answered.
func TestHTTPCommandCancelEndsStream(t *testing.T) {
	url := commandSidecar(t)
	sid := initialize(t, url, nil)
	postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil).Body.Close()
	resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`), nil)
	defer resp.Body.Close()
	if evs := readEvents(t, resp.Body, func(event) bool { return true }); len(evs) != 1 || evs[0].id == "" {
		t.Fatalf("POST stream began with %+v; want a priming event", evs)
	}
	c := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"enough"}}`), nil)
	c.Body.Close()
	if c.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: status %d, want 202", c.StatusCode)
	}
	if rest := readEvents(t, resp.Body, func(event) bool { return false }); len(rest) != 0 {
		t.Fatalf("the cancelled request's stream went on with %+v; want its end", rest)
	}
	// The session goes on.
	if got := answer(t, url, sid, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"next"}}}`); gjson.Get(got, "result.content.0.text").Str != "next" {
		t.Fatalf("after the cancel: %s", got)
	}
}

// TestHTTPCommandEndedLogsBounded: a session keeps the logs of its most
// recent ended request streams only, so that fast calls do not pile up
// logs for the replay age: the last stream can be resumed (its response
// sent again), the first, many calls ago, no longer.
func TestHTTPCommandEndedLogsBounded(t *testing.T) {
	url := commandSidecar(t)
	sid := initialize(t, url, nil)
	postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil).Body.Close()
	var first, last string // the priming events' ids
	const calls = 200      // past the bound, with room to spare
	for i := range calls {
		id := strconv.Itoa(100 + i)
		resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`), nil)
		evs := readEvents(t, resp.Body, func(event) bool { return false })
		resp.Body.Close()
		if len(evs) != 2 || evs[0].data != "" || gjson.Get(evs[1].data, "id").Raw != id {
			t.Fatalf("call %s: events %+v; want a priming event and the response", id, evs)
		}
		if i == 0 {
			first = evs[0].id
		}
		last = evs[0].id
	}
	resume := func(lastID string) []event {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Last-Event-ID", lastID)
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return readEvents(t, resp.Body, func(event) bool { return true })
	}
	if evs := resume(last); len(evs) != 1 || gjson.Get(evs[0].data, "id").Raw != strconv.Itoa(100+calls-1) {
		t.Fatalf("resuming the last stream: %+v; want its response again", evs)
	}
	// The first stream's log is gone: a new listening stream opens,
	// starting with its own priming event.
	stream := func(id string) string { s, _, _ := strings.Cut(id, "_"); return s }
	if evs := resume(first); len(evs) != 1 || evs[0].data != "" || evs[0].id == "" || stream(evs[0].id) == stream(first) {
		t.Fatalf("resuming the first stream: %+v; want a new stream's priming event", evs)
	}
}
