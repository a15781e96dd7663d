package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

// fakeSearcher stands in for the daemon's client: it filters and ranks a
// fixed list the way the query asks, and can fail or stall.
type fakeSearcher struct {
	mu      sync.Mutex
	list    []hindsight.ScoredExperience
	err     error
	stall   bool // block until ctx ends
	queries []hindsight.Query
}

func (f *fakeSearcher) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	f.mu.Lock()
	f.queries = append(f.queries, q)
	list, err, stall := f.list, f.err, f.stall
	f.mu.Unlock()
	if stall {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	var out []hindsight.ScoredExperience
	for _, e := range list {
		if (q.Server == "" || e.Server == q.Server) && (q.Tool == "" || e.Tool == q.Tool) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	k := q.K
	if k == 0 {
		k = 5
	}
	if len(out) > k {
		out = out[:k]
	}
	return out, nil
}

func (f *fakeSearcher) lastQueries() []hindsight.Query {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]hindsight.Query(nil), f.queries...)
}

func exp(id, server, tool, code, lesson string, score float64) hindsight.ScoredExperience {
	return hindsight.ScoredExperience{Score: score, Experience: hindsight.Experience{
		ID: id, Server: server, Tool: tool, ErrorCode: code, Lesson: lesson, Confidence: 0.8,
		Situation: "calling " + tool, Action: "called " + tool, Result: "it worked after the fix",
	}}
}

// lessons is a small, realistic experience set for the server "example".
func lessons() []hindsight.ScoredExperience {
	return []hindsight.ScoredExperience{
		exp("e1", "example", "fetch_report", "401", "Call login before fetch_report; it answers 401 without a session.", 0.9),
		exp("e2", "example", "create_invoice", "400", "Pass due_date to create_invoice as YYYY-MM-DD, e.g. 2026-03-15.", 0.8),
		exp("e3", "example", "send_invoice", "429", "Call send_invoice with pause_ms=300; without it the server answers 429.", 0.7),
		exp("e4", "other", "fetch_report", "401", "A lesson from another server that must not show.", 0.99),
		exp("e5", "example", "fetch_report", "500", "Retry fetch_report once on 500.", 0.5),
	}
}

// harness is a proxy.Conn with the injector's hooks installed, driven like a
// transport would drive it.
type harness struct {
	t     *testing.T
	conn  *proxy.Conn
	inj   *Injector
	mu    sync.Mutex
	exchs []*proxy.Exchange
}

func newHarness(t *testing.T, inj *Injector) *harness {
	t.Helper()
	if inj.Server == "" {
		inj.Server = "example"
	}
	if inj.Logger == nil {
		inj.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := &harness{t: t, inj: inj}
	hooks := &proxy.Hooks{Exchange: func(ex *proxy.Exchange) {
		h.mu.Lock()
		h.exchs = append(h.exchs, ex)
		h.mu.Unlock()
	}}
	inj.Install(hooks)
	h.conn = &proxy.Conn{
		Hooks:       hooks,
		Session:     &proxy.Session{ID: "s1", Server: "example", Transport: "stdio"},
		Logger:      inj.Logger,
		HookTimeout: time.Second,
	}
	return h
}

// roundTrip sends request from the agent, answers it with response from the
// server, and returns what the agent receives.
func (h *harness) roundTrip(request, response string) []byte {
	h.t.Helper()
	a := h.conn.FromClient([]byte(request))
	if a.Forward == nil {
		h.t.Fatalf("request %s was not forwarded: %+v", request, a)
	}
	return h.conn.FromServer([]byte(response))
}

// local sends a request the sidecar should answer itself and returns the
// answer.
func (h *harness) local(request string) []byte {
	h.t.Helper()
	a := h.conn.FromClient([]byte(request))
	if a.Local == nil {
		h.t.Fatalf("request %s was not answered locally: forward=%s reply=%s", request, a.Forward, a.Reply)
	}
	return a.Local(context.Background())
}

func (h *harness) injected() []hindsight.Injection {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hindsight.Injection
	for _, ex := range h.exchs {
		out = append(out, ex.Injected...)
	}
	return out
}

func (h *harness) lastExchange() *proxy.Exchange {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.exchs) == 0 {
		h.t.Fatal("no exchange emitted")
	}
	return h.exchs[len(h.exchs)-1]
}

const initReq = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func initResp(instructions string) string {
	return `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"x-odd":  [1, 2.50, "\u00e9"]},"serverInfo":{"name":"ex","version":"1"}` +
		instructions + `,"_meta":{"k":"v"}},"extra":true}`
}

// sameExcept asserts that got equals want byte for byte outside the value at
// path.
func sameExcept(t *testing.T, want, got []byte, path string) {
	t.Helper()
	w, g := gjson.GetBytes(want, path), gjson.GetBytes(got, path)
	if !g.Exists() {
		t.Fatalf("%s missing in %s", path, got)
	}
	if !w.Exists() {
		t.Fatalf("%s missing in the original %s", path, want)
	}
	if !bytes.Equal(want[:w.Index], got[:g.Index]) || !bytes.Equal(want[w.Index+len(w.Raw):], got[g.Index+len(g.Raw):]) {
		t.Fatalf("bytes outside %s changed:\nwant %s\ngot  %s", path, want, got)
	}
}

const listReq = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`

func callReq(id int, situation, tool string) string {
	args := map[string]string{"situation": situation}
	if tool != "" {
		args["tool_name"] = tool
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "query_hindsight", "arguments": args}})
	return string(b)
}

// answerText returns the text of a local query_hindsight answer, checking
// it is a well-formed successful tool result.
func answerText(t *testing.T, resp []byte) string {
	t.Helper()
	r := gjson.ParseBytes(resp)
	if r.Get("error").Exists() {
		t.Fatalf("query_hindsight answered with a protocol error: %s", resp)
	}
	if r.Get("result.isError").Bool() {
		t.Fatalf("query_hindsight answered isError: %s", resp)
	}
	items := r.Get("result.content").Array()
	if len(items) != 1 || items[0].Get("type").String() != "text" {
		t.Fatalf("content = %s", r.Get("result.content"))
	}
	return items[0].Get("text").String()
}

// experienceBlocks splits a query_hindsight answer into its numbered blocks.
func experienceBlocks(text string) []string {
	_, body, _ := strings.Cut(text, "\n\n")
	if body == "" {
		return nil
	}
	return strings.Split(body, "\n\n")
}
