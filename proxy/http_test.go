package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

// recorder is a small Streamable HTTP upstream that records what reaches it
// and answers with canned bytes.
type recorder struct {
	mu      sync.Mutex
	methods []string
	headers []http.Header
	bodies  [][]byte
	// answer returns the status, content type and body for a POSTed body.
	answer func(body []byte) (int, string, []byte)
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.methods = append(rec.methods, r.Method)
	rec.headers = append(rec.headers, r.Header.Clone())
	rec.bodies = append(rec.bodies, body)
	rec.mu.Unlock()
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if gjson.GetBytes(body, "method").Str == "initialize" {
		w.Header().Set("Mcp-Session-Id", "upstream-session-1")
	}
	if !gjson.GetBytes(body, "id").Exists() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	status, ct, out := http.StatusOK, "application/json", []byte(nil)
	if rec.answer != nil {
		status, ct, out = rec.answer(body)
	} else {
		out = []byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(body, "id").Raw + `,"result":{}}`)
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	w.Write(out)
}

func (rec *recorder) last() (http.Header, []byte) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.headers[len(rec.headers)-1], rec.bodies[len(rec.bodies)-1]
}

// sidecar serves h in front of rec and returns its /mcp URL.
func sidecar(t *testing.T, rec http.Handler, configure func(h *proxy.HTTPHandler)) string {
	t.Helper()
	up := httptest.NewServer(rec)
	t.Cleanup(up.Close)
	h := &proxy.HTTPHandler{Upstream: &proxy.HTTPUpstream{URL: up.URL + "/mcp", Transport: proxy.TransportStreamable}, Server: "rec",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if configure != nil {
		configure(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return srv.URL + "/mcp"
}

// postMCP sends one message to the sidecar.
func postMCP(t *testing.T, url, sid string, body []byte, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// testClient turns a stuck exchange into a failure instead of a hang.
var testClient = &http.Client{Timeout: 2 * time.Minute}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// initialize opens a session and returns its id.
func initialize(t *testing.T, url string, hdr map[string]string) string {
	t.Helper()
	resp := postMCP(t, url, "", []byte(initBody), hdr)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: status %d, session %q: %s", resp.StatusCode, sid, body)
	}
	return sid
}

func TestHTTPHeaderPassThrough(t *testing.T) {
	rec := &recorder{}
	url := sidecar(t, rec, nil)
	agent := map[string]string{
		"Authorization":        "Bearer agent-secret",
		"X-Custom":             "kept",
		"MCP-Protocol-Version": "2025-11-25",
		"Connection":           "X-Hop",
		"X-Hop":                "dropped",
		"Keep-Alive":           "timeout=5",
	}
	sid := initialize(t, url, agent)
	if sid == "upstream-session-1" {
		t.Error("the agent got the upstream's session id; want the sidecar's own")
	}
	resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), agent)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	got, _ := rec.last()
	for k, want := range map[string]string{
		"Authorization":        "Bearer agent-secret",
		"X-Custom":             "kept",
		"Mcp-Protocol-Version": "2025-11-25",
		"Mcp-Session-Id":       "upstream-session-1",
		"X-Hop":                "",
		"Keep-Alive":           "",
	} {
		if g := got.Get(k); g != want {
			t.Errorf("upstream saw %s = %q, want %q", k, g, want)
		}
	}
}

func TestHTTPAuthToken(t *testing.T) {
	for _, tc := range []struct {
		name      string
		upstream  string // --upstream-header Authorization
		agentAuth string
		status    int
		upAuth    string // what the upstream must see
	}{
		{"missing", "", "", http.StatusUnauthorized, ""},
		{"wrong", "", "Bearer nope", http.StatusUnauthorized, ""},
		{"prefix of the token", "", "Bearer sidecar-tok", http.StatusUnauthorized, ""},
		{"right, agent's not forwarded", "", "Bearer sidecar-token", http.StatusOK, ""},
		{"right, upstream's own", "Bearer upstream-cred", "Bearer sidecar-token", http.StatusOK, "Bearer upstream-cred"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			url := sidecar(t, rec, func(h *proxy.HTTPHandler) {
				h.AuthToken = "sidecar-token"
				if tc.upstream != "" {
					h.Upstream.(*proxy.HTTPUpstream).Header = http.Header{"Authorization": {tc.upstream}}
				}
			})
			hdr := map[string]string{}
			if tc.agentAuth != "" {
				hdr["Authorization"] = tc.agentAuth
			}
			resp := postMCP(t, url, "", []byte(initBody), hdr)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != http.StatusOK {
				if len(rec.bodies) != 0 {
					t.Error("an unauthorized request reached the upstream")
				}
				if resp.Header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				return
			}
			got, _ := rec.last()
			if g := got.Get("Authorization"); g != tc.upAuth {
				t.Errorf("upstream saw Authorization %q, want %q", g, tc.upAuth)
			}
		})
	}
}

func TestHTTPUpstreamErrorStatus(t *testing.T) {
	rec := &recorder{answer: func(body []byte) (int, string, []byte) {
		if gjson.GetBytes(body, "method").Str == "initialize" {
			return 200, "application/json", []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"r","version":"1"}}}`)
		}
		return http.StatusBadGateway, "text/plain", []byte("the backend is down")
	}}
	url := sidecar(t, rec, nil)
	sid := initialize(t, url, nil)
	resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":"call-9","method":"tools/call","params":{"name":"x"}}`), nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	msg := gjson.GetBytes(body, "error.message").Str
	if gjson.GetBytes(body, "id").Raw != `"call-9"` || !strings.Contains(msg, "upstream HTTP 502") || !strings.Contains(msg, "the backend is down") {
		t.Fatalf("got %d %s; want a JSON-RPC error for id call-9 naming HTTP 502", resp.StatusCode, body)
	}
}

// TestHTTPUnknownBytes checks that an unknown method and unknown fields pass
// both ways byte for byte, in JSON and in event-stream replies.
func TestHTTPUnknownBytes(t *testing.T) {
	const reqBody = `{"jsonrpc":"2.0", "id":7,"method":"x/unknown","params":{"weird":[1,2.50,{"z":null}],"_meta":{"k":"v"}},"extra":true}`
	const respBody = `{"jsonrpc":"2.0","id":7,"result":{"zzz" : 1,"nested":{"a":[]},"_meta":{"m":1}},"unknownTop":"x"}`
	for _, ct := range []string{"application/json", "text/event-stream"} {
		t.Run(ct, func(t *testing.T) {
			rec := &recorder{answer: func(body []byte) (int, string, []byte) {
				if gjson.GetBytes(body, "method").Str == "initialize" {
					return 200, "application/json", []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
				}
				if ct == "text/event-stream" {
					return 200, ct, []byte("id: 1\ndata: \n\nevent: message\ndata: " + `{"jsonrpc":"2.0","method":"notifications/x-unknown","params":{"q":[true]}}` + "\n\nevent: message\ndata: " + respBody + "\n\n")
				}
				return 200, ct, []byte(respBody)
			}}
			url := sidecar(t, rec, nil)
			sid := initialize(t, url, nil)
			resp := postMCP(t, url, sid, []byte(reqBody), nil)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if _, got := rec.last(); string(got) != reqBody {
				t.Errorf("upstream got %s\nwant %s", got, reqBody)
			}
			// The agent's answer to a server request, and an unknown
			// notification, reach the upstream byte for byte.
			for _, msg := range []string{
				`{"jsonrpc":"2.0","id":"srv-1","result":{"odd":[1, 2]},"x-extra":{}}`,
				`{"jsonrpc":"2.0","method":"notifications/x-vendor","params":{"_meta":{"a":1}}}`,
			} {
				resp := postMCP(t, url, sid, []byte(msg), nil)
				resp.Body.Close()
				if _, got := rec.last(); resp.StatusCode != http.StatusAccepted || string(got) != msg {
					t.Errorf("status %d; upstream got %s\nwant %s", resp.StatusCode, got, msg)
				}
			}
			if ct == "application/json" {
				if string(body) != respBody {
					t.Errorf("agent got %s\nwant %s", body, respBody)
				}
				return
			}
			if resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Errorf("content type %q, want the upstream's event stream", resp.Header.Get("Content-Type"))
			}
			// The priming event (an id, empty data) passes too.
			want := "id: 1\ndata: \n\nevent: message\ndata: " + `{"jsonrpc":"2.0","method":"notifications/x-unknown","params":{"q":[true]}}` + "\n\nevent: message\ndata: " + respBody + "\n\n"
			if string(body) != want {
				t.Errorf("agent got %q\nwant %q", body, want)
			}
		})
	}
}

// TestHTTPServerDiscover relays a sessionless 2026-07-28 server/discover
// and applies the Initialize hook to its result.
func TestHTTPServerDiscover(t *testing.T) {
	rec := &recorder{answer: func(body []byte) (int, string, []byte) {
		return 200, "application/json", []byte(`{"jsonrpc":"2.0","id":3,"result":{"supportedVersions":["2026-07-28"],"capabilities":{},"serverInfo":{"name":"r","version":"1"},"instructions":"upstream says hi","future":{"x":1}}}`)
	}}
	url := sidecar(t, rec, func(h *proxy.HTTPHandler) {
		h.Hooks = &proxy.Hooks{Initialize: func(ctx context.Context, s *proxy.Session, result json.RawMessage) json.RawMessage {
			out := strings.Replace(string(result), "upstream says hi", "upstream says hi\\n[hindsight] lesson", 1)
			return json.RawMessage(out)
		}}
	})
	resp := postMCP(t, url, "", []byte(`{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`), map[string]string{"MCP-Protocol-Version": "2026-07-28"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Mcp-Session-Id") != "" {
		t.Error("server/discover opened a session")
	}
	if got := gjson.GetBytes(body, "result.instructions").Str; got != "upstream says hi\n[hindsight] lesson" {
		t.Errorf("instructions %q; the Initialize hook did not apply (%s)", got, body)
	}
	if gjson.GetBytes(body, "result.future.x").Int() != 1 {
		t.Errorf("unknown result field lost: %s", body)
	}
	hdr, _ := rec.last()
	if hdr.Get("Mcp-Session-Id") != "" || hdr.Get("Mcp-Protocol-Version") != "2026-07-28" {
		t.Errorf("upstream saw session %q, protocol %q", hdr.Get("Mcp-Session-Id"), hdr.Get("Mcp-Protocol-Version"))
	}
}

// TestHTTPLargeBodies carries a 65 MiB request and a 20 MB result.
func TestHTTPLargeBodies(t *testing.T) {
	big := strings.Repeat("a", 20<<20)
	rec := &recorder{answer: func(body []byte) (int, string, []byte) {
		id := gjson.GetBytes(body, "id").Raw
		n := len(gjson.GetBytes(body, "params.arguments.blob").Str)
		return 200, "text/event-stream", []byte(`data: {"jsonrpc":"2.0","id":` + id + `,"result":{"n":` + strconv.Itoa(n) + `,"content":[{"type":"text","text":"` + big + `"}]}}` + "\n\n")
	}}
	url := sidecar(t, rec, nil)
	sid := initialize(t, url, nil)
	blob := strings.Repeat("b", 65<<20)
	resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"blob":"`+blob+`"}}}`), nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	data := strings.TrimSuffix(strings.TrimPrefix(string(body), "data: "), "\n\n") // the event as the upstream wrote it
	r := gjson.Parse(data)
	if r.Get("result.n").Int() != 65<<20 || len(r.Get("result.content.0.text").Str) != len(big) {
		t.Fatalf("request or result cut: n=%d, text=%d bytes (%d bytes of body)", r.Get("result.n").Int(), len(r.Get("result.content.0.text").Str), len(body))
	}
}

// TestHTTPIdleSession ends a session the agent left without DELETE, and
// ends the upstream session with it.
func TestHTTPIdleSession(t *testing.T) {
	rec := &recorder{}
	url := sidecar(t, rec, func(h *proxy.HTTPHandler) { h.IdleTimeout = 50 * time.Millisecond })
	sid := initialize(t, url, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/ping-ish"}`), nil)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session was never ended")
		}
		time.Sleep(200 * time.Millisecond) // longer than the timeout: the session idles
	}
	for time.Now().Before(deadline) {
		rec.mu.Lock()
		var deleted bool
		for i, h := range rec.headers {
			deleted = deleted || (rec.methods[i] == http.MethodDelete && h.Get("Mcp-Session-Id") == "upstream-session-1")
		}
		rec.mu.Unlock()
		if deleted {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Error("the upstream session was not ended with a DELETE")
}

// TestHTTPStreamsWithoutBuffering checks that each event of an upstream
// stream reaches the agent while the upstream is still working.
func TestHTTPStreamsWithoutBuffering(t *testing.T) {
	release := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || !gjson.GetBytes(body, "id").Exists() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if gjson.GetBytes(body, "method").Str == "initialize" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"done\":true}}\n\n"))
	})
	url := sidecar(t, up, nil)
	sid := initialize(t, url, nil)
	resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"p"}}}`), nil)
	defer resp.Body.Close()
	got := make(chan string, 2)
	go func() {
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(got)
				return
			}
			if strings.HasPrefix(line, "data: ") {
				got <- line
			}
		}
	}()
	select {
	case line := <-got:
		if !strings.Contains(line, "notifications/progress") {
			t.Fatalf("first event %q, want the progress notification", line)
		}
	case <-time.After(20 * time.Second): // a deadlock guard, not a timing check
		t.Fatal("the progress notification was held back while the upstream worked")
	}
	close(release)
	if line := <-got; !strings.Contains(line, `"done":true`) {
		t.Fatalf("second event %q, want the response", line)
	}
}

// TestHTTPUpstreamUnauthorized passes an upstream's 401 and its challenge
// to an agent whose credentials were forwarded, so it can authorize again;
// with the sidecar's own token, the agent's credentials are not in play and
// it gets a JSON-RPC error.
func TestHTTPUpstreamUnauthorized(t *testing.T) {
	const challenge = `Bearer resource_metadata="https://up.example/.well-known/oauth-protected-resource"`
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, "token expired", http.StatusUnauthorized)
	})
	for _, token := range []string{"", "sidecar-token"} {
		url := sidecar(t, up, func(h *proxy.HTTPHandler) { h.AuthToken = token })
		resp := postMCP(t, url, "", []byte(initBody), map[string]string{"Authorization": "Bearer " + token})
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantStatus, wantChallenge := http.StatusUnauthorized, challenge
		if token != "" {
			wantStatus, wantChallenge = http.StatusOK, ""
		}
		if resp.StatusCode != wantStatus || resp.Header.Get("WWW-Authenticate") != wantChallenge {
			t.Errorf("token %q: status %d, challenge %q; want %d, %q", token, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), wantStatus, wantChallenge)
		}
		if msg := gjson.GetBytes(body, "error.message").Str; !strings.Contains(msg, "upstream HTTP 401: token expired") {
			t.Errorf("token %q: body %s", token, body)
		}
	}
}

// TestHTTPBatch relays a JSON-RPC batch (spec 2025-03-26) and its answer
// unchanged on the same POST.
func TestHTTPBatch(t *testing.T) {
	const batch = `[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"tools/list"}]`
	const answers = `[{"jsonrpc":"2.0","id":5,"result":{}},{"jsonrpc":"2.0","id":6,"result":{"tools":[]}}]`
	rec := &recorder{answer: func(body []byte) (int, string, []byte) {
		if gjson.GetBytes(body, "method").Str == "initialize" {
			return 200, "application/json", []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
		}
		return 200, "application/json", []byte(answers)
	}}
	rec2 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.HasPrefix(b, []byte("[")) { // a batch has no top-level id: answer it anyway
				rec.mu.Lock()
				rec.bodies = append(rec.bodies, b)
				rec.mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(answers))
				return
			}
		}
		rec.ServeHTTP(w, r)
	})
	steps := newSteps(t)
	url := sidecar(t, rec2, func(h *proxy.HTTPHandler) { h.Hooks = steps.hooks() })
	sid := initialize(t, url, nil)
	resp := postMCP(t, url, sid, []byte(batch), nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, got := rec.last(); string(got) != batch {
		t.Errorf("upstream got %s", got)
	}
	if resp.StatusCode != http.StatusOK || string(body) != answers {
		t.Errorf("agent got %d %s; want %s", resp.StatusCode, body, answers)
	}
	// Each call of the batch is recorded as a step of its own.
	ping, list := steps.only("ping"), steps.only("tools/list")
	if string(ping.Request) != `{"jsonrpc":"2.0","id":5,"method":"ping"}` || string(ping.Response) != `{"jsonrpc":"2.0","id":5,"result":{}}` ||
		string(list.Response) != `{"jsonrpc":"2.0","id":6,"result":{"tools":[]}}` || failed(ping) || failed(list) {
		t.Errorf("recorded ping %s → %s, tools/list %s → %s", ping.Request, ping.Response, list.Request, list.Response)
	}
}

// TestHTTPBatchRefused: an upstream of a later protocol refuses a batch
// with a JSON-RPC error naming no id; the agent gets it as it came, each
// request of the batch is recorded as failed, and their ids are free again.
func TestHTTPBatchRefused(t *testing.T) {
	const refusal = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batches are not supported"}}`
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case bytes.HasPrefix(b, []byte("[")):
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, refusal)
		case gjson.GetBytes(b, "method").Str == "initialize":
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		default:
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+gjson.GetBytes(b, "id").Raw+`,"result":{}}`)
		}
	})
	steps := newSteps(t)
	url := sidecar(t, up, func(h *proxy.HTTPHandler) { h.Hooks = steps.hooks() })
	sid := initialize(t, url, nil)
	resp := postMCP(t, url, sid, []byte(`[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"}]`), nil)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || string(body) != refusal {
		t.Fatalf("agent got %d %s; want the refusal as it came", resp.StatusCode, body)
	}
	if ex := steps.only("ping"); !failed(ex) || string(ex.Response) != refusal {
		t.Errorf("recorded %s (failure %q); want a failed step with the refusal", ex.Response, ex.Failure)
	}
	// Id 7 is not held in flight by the refused batch.
	resp = postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`), nil)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if gjson.GetBytes(body, "error").Exists() {
		t.Errorf("id 7 after the refused batch: %s", body)
	}
}

// TestHTTPOrigin lets browser clients of the sidecar's own origin and of
// AllowedOrigins in (with CORS) and keeps other origins out: a page on
// another port of 127.0.0.1 is another origin (any local web server the
// user visits), as is a rebound name.
func TestHTTPOrigin(t *testing.T) {
	url := sidecar(t, &recorder{}, func(h *proxy.HTTPHandler) {
		h.AuthToken, h.AllowedOrigins = "tok", []string{"http://localhost:6274"}
	})
	port := url[strings.LastIndex(url, ":")+1 : strings.LastIndex(url, "/")]
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"http://localhost:6274", http.StatusNoContent},  // allowed
		{"http://127.0.0.1:6274", http.StatusForbidden},  // another origin than the allowed one
		{"http://localhost:6275", http.StatusForbidden},  // another loopback port
		{"https://localhost:6274", http.StatusForbidden}, // another scheme
		{"http://127.0.0.1:" + port, http.StatusNoContent},
		{"http://localhost:" + port, http.StatusNoContent}, // a loopback name on the sidecar's own port
		{"http://[::1]:" + port, http.StatusNoContent},
		{"http://evil.example", http.StatusForbidden},
		{"http://evil.example:" + port, http.StatusForbidden},
		{"http://127.0.0.1.evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodOptions, url, nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, mcp-session-id")
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("preflight from %s: status %d, want %d", tc.origin, resp.StatusCode, tc.status)
		}
		if tc.status == http.StatusNoContent && (resp.Header.Get("Access-Control-Allow-Origin") != tc.origin ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "mcp-session-id")) {
			t.Errorf("preflight from %s: CORS headers %v", tc.origin, resp.Header)
		}
	}
	resp := postMCP(t, url, "", []byte(initBody), map[string]string{"Origin": "http://localhost:6274", "Authorization": "Bearer tok"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
		t.Errorf("POST from an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	// Without a token, a page on another loopback port is refused before
	// anything reaches the upstream; a client without Origin passes.
	open := sidecar(t, &recorder{}, nil)
	resp = postMCP(t, open, "", []byte(initBody), map[string]string{"Origin": "http://127.0.0.1:6274"})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST from another loopback port without a token: %d, want 403", resp.StatusCode)
	}
	resp = postMCP(t, open, "", []byte(initBody), nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST without Origin: %d, want 200", resp.StatusCode)
	}
}
