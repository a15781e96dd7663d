package proxy_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

// commandSidecar serves an HTTPHandler in front of the fake stdio server
// (this test binary re-executed), changed by configure, and returns its
// /mcp URL.
func commandSidecar(t testing.TB, configure ...func(h *proxy.HTTPHandler)) string {
	t.Helper()
	h := &proxy.HTTPHandler{
		Upstream: &proxy.CommandUpstream{
			Path: os.Args[0], Args: fakeserver.Args("TestStdioFakeServer"),
			Env: fakeserver.Env(fakeserver.ModeMCP, "", ""), Server: "fake",
			GracePeriod: 300 * time.Millisecond,
			Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		},
		Server: "fake",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, f := range configure {
		f(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv.URL + "/mcp"
}

// answer posts body and returns the JSON-RPC response, from a JSON body or
// the last event of a stream.
func answer(t *testing.T, url, sid, body string) string {
	t.Helper()
	resp := postMCP(t, url, sid, []byte(body), nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := string(b)
	if i := strings.LastIndex(out, "data: "); i >= 0 {
		out = strings.TrimSpace(out[i+len("data: "):])
	}
	return out
}

// TestHTTPCommandSessionless sends sessionless requests of two agents that
// use the same id at the same time through one child: each agent gets its
// own answer.
func TestHTTPCommandSessionless(t *testing.T) {
	url := commandSidecar(t)
	var wg sync.WaitGroup
	var slow, fast string
	wg.Add(2)
	go func() {
		defer wg.Done()
		slow = answer(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":300}}}`)
	}()
	go func() {
		defer wg.Done()
		time.Sleep(50 * time.Millisecond) // usually after the slow one
		fast = answer(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"fast"}}}`)
	}()
	wg.Wait()
	if gjson.Get(slow, "result.content.0.text").Str != "slow done" || gjson.Get(fast, "result.content.0.text").Str != "fast" {
		t.Fatalf("answers crossed:\n slow call got %s\n echo call got %s", slow, fast)
	}
}

// TestHTTPCommandCrash crashes the child under a session: the request in
// flight gets an error naming the exit status, the session ends with its
// child (404: the agent initializes again) and gives its slot back, so a
// sidecar of one child takes a new session.
func TestHTTPCommandCrash(t *testing.T) {
	pids := t.TempDir() + "/pids"
	url := commandSidecar(t, func(h *proxy.HTTPHandler) {
		h.MaxChildren = 1
		h.IdleTimeout = -1 // only the child's exit frees the slot
		h.Upstream.(*proxy.CommandUpstream).Env = fakeserver.Env(fakeserver.ModeMCP, "", pids)
	})
	sid := initialize(t, url, nil)
	resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	resp.Body.Close()
	got := answer(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash","arguments":{"status":3}}}`)
	if msg := gjson.Get(got, "error.message").Str; gjson.Get(got, "id").Raw != "2" || !strings.Contains(msg, "exit status 3") {
		t.Fatalf("crash: got %s; want an error for id 2 naming exit status 3", got)
	}
	// The session ends as its child's exit is seen (just after the answer).
	waitStatus(t, url, sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, http.StatusNotFound)
	sid2 := waitSession(t, url)
	got = answer(t, url, sid2, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"again"}}}`)
	if gjson.Get(got, "result.content.0.text").Str != "again" {
		t.Fatalf("in a new session: %s", got)
	}
	if n := len(strings.Fields(readFile(t, pids))); n != 2 {
		t.Errorf("%d children started, want 2 (none restarted under the ended session)", n)
	}
}

// TestHTTPCommandAbandonedSessions: agents that crashed without DELETE hold
// every child slot; after --session-idle their sessions end, their
// children are stopped, and new agents get sessions again.
func TestHTTPCommandAbandonedSessions(t *testing.T) {
	pids := t.TempDir() + "/pids"
	url := commandSidecar(t, func(h *proxy.HTTPHandler) {
		h.MaxChildren = 3
		h.IdleTimeout = 200 * time.Millisecond
		h.Upstream.(*proxy.CommandUpstream).Env = fakeserver.Env(fakeserver.ModeMCP, "", pids)
	})
	var abandoned []string
	for range 3 {
		abandoned = append(abandoned, initialize(t, url, nil))
	}
	// A flood of agents past the slots: refused while the crashed ones hold them.
	resp := postMCP(t, url, "", []byte(initBody), nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize past the slots: %d", resp.StatusCode)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		waitSession(t, url) // reclaimed after the idle time
	}
	for _, p := range strings.Fields(readFile(t, pids))[:3] {
		pid, _ := strconv.Atoi(p)
		testkit.WaitGone(t, pid)
	}
	for _, sid := range abandoned { // a request now would keep a session alive: one, after
		resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":9,"method":"ping"}`), nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("abandoned session %s: %d, want 404", sid, resp.StatusCode)
		}
	}
}

// waitStatus posts body in session sid until the answer has status want
// (the session's end trails the events that cause it).
func waitStatus(t *testing.T, url, sid, body string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := postMCP(t, url, sid, []byte(body), nil)
		resp.Body.Close()
		if resp.StatusCode == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: status %d, want %d", sid, resp.StatusCode, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSession initializes a session, retrying while the sidecar answers
// 503 (no slot free yet), and returns its id.
func waitSession(t *testing.T, url string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := postMCP(t, url, "", []byte(initBody), nil)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if sid := resp.Header.Get("Mcp-Session-Id"); resp.StatusCode == http.StatusOK && sid != "" {
			return sid
		}
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("initialize: %d; want a session once a slot is free", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHTTPCommandResume checks that a request stream the sidecar is the
// origin of (a command upstream) can be resumed with Last-Event-ID: the
// agent reads the priming event, loses the stream, and a GET naming the
// priming event's id gets the response that came meanwhile.
func TestHTTPCommandResume(t *testing.T) {
	url := commandSidecar(t)
	sid := initialize(t, url, nil)
	postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil).Body.Close()
	resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{"ms":200}}}`), nil)
	evs := readEvents(t, resp.Body, func(event) bool { return true }) // the first event only
	resp.Body.Close()                                                 // the agent loses the stream
	if len(evs) != 1 || evs[0].id == "" || evs[0].data != "" {
		t.Fatalf("POST stream began with %+v; want a priming event", evs)
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Last-Event-ID", evs[0].id)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs = readEvents(t, resp.Body, func(ev event) bool { return gjson.Get(ev.data, "id").Raw == "5" })
	if len(evs) == 0 || gjson.Get(evs[len(evs)-1].data, "result.content.0.text").Str != "slow done" || evs[len(evs)-1].id == "" {
		t.Fatalf("resumed stream (status %d): %+v; want the response to 5, with an event id", resp.StatusCode, evs)
	}
	// Resuming after the response's own id: the stream has ended, nothing
	// is sent again.
	req.Header.Set("Last-Event-ID", evs[len(evs)-1].id)
	resp2, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	if again := readEvents(t, resp2.Body, func(event) bool { return false }); len(again) != 0 {
		t.Errorf("resumed after the last event, got %+v", again)
	}
}

// TestHTTPCommandBatch: a batch relayed to a stdio server whose answer is
// a batch too (which reaches the agent's GET stream, as today) has each of
// its calls recorded.
func TestHTTPCommandBatch(t *testing.T) {
	steps := newSteps(t)
	url := commandSidecar(t, func(h *proxy.HTTPHandler) { h.Hooks = steps.hooks() })
	sid := initialize(t, url, nil)
	postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil).Body.Close()
	const answers = `[{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"seven"}]}},{"jsonrpc":"2.0","id":8,"result":{}}]`
	resp := postMCP(t, url, sid, []byte(`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"seven"}}},{"jsonrpc":"2.0","id":8,"method":"ping"}]`), nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("batch: %d", resp.StatusCode)
	}
	// The fake server answers no batch itself: it is made to send one.
	say, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "fake/say", "params": map[string]any{"lines": []string{answers}}})
	postMCP(t, url, sid, say, nil).Body.Close()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	get, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer get.Body.Close()
	evs := readEvents(t, get.Body, func(ev event) bool { return strings.HasPrefix(ev.data, "[") })
	if len(evs) == 0 || evs[len(evs)-1].data != answers {
		t.Fatalf("GET stream: %+v; want the batch answer as the server sent it", evs)
	}
	call, ping := steps.only("tools/call"), steps.only("ping")
	if gjson.GetBytes(call.Response, "result.content.0.text").Str != "seven" || string(ping.Response) != `{"jsonrpc":"2.0","id":8,"result":{}}` {
		t.Errorf("recorded tools/call → %s, ping → %s", call.Response, ping.Response)
	}
}

// TestHTTPCommandMessageTooLong sends a request over the command
// upstream's size limit: the child never sees it, the agent gets a
// JSON-RPC error for its id, and the session goes on.
func TestHTTPCommandMessageTooLong(t *testing.T) {
	url := commandSidecar(t, func(h *proxy.HTTPHandler) {
		h.Upstream.(*proxy.CommandUpstream).MaxBytes = 1024
	})
	sid := initialize(t, url, nil)
	big := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 4096) + `"}}}`
	out := answer(t, url, sid, big)
	if gjson.Get(out, "id").Raw != "7" || !strings.Contains(gjson.Get(out, "error.message").String(), "exceeds the limit of 1024 bytes") {
		t.Fatalf("answer to the long request: %s", out)
	}
	out = answer(t, url, sid, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"short"}}}`)
	if gjson.Get(out, "id").Raw != "8" || gjson.Get(out, "error").Exists() {
		t.Fatalf("answer to the next request: %s", out)
	}
}
