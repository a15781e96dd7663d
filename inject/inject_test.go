package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

func TestInitializeAppendsLessons(t *testing.T) {
	src := &fakeSearcher{list: lessons()}
	h := newHarness(t, &Injector{Source: src})
	orig := initResp(`,"instructions":"Use the tools in order.\nBe nice."`)
	out := h.roundTrip(initReq, orig)
	sameExcept(t, []byte(orig), out, "result.instructions")
	instr := gjson.GetBytes(out, "result.instructions").String()
	if !strings.HasPrefix(instr, "Use the tools in order.\nBe nice.\n\n"+Marker) {
		t.Errorf("instructions do not keep the server's text first:\n%s", instr)
	}
	for _, want := range []string{"fetch_report: Call login before fetch_report", "create_invoice: Pass due_date", "send_invoice: Call send_invoice with pause_ms=300", "query_hindsight"} {
		if !strings.Contains(instr, want) {
			t.Errorf("instructions lack %q:\n%s", want, instr)
		}
	}
	if strings.Contains(instr, "another server") || strings.Contains(instr, "Retry fetch_report") {
		t.Errorf("instructions hold more than the top 3 lessons of this server:\n%s", instr)
	}
	inj := h.injected()
	if len(inj) != 1 || inj[0].Channel != ChannelInstructions || len(inj[0].ExperienceIDs) != 3 {
		t.Fatalf("injection not recorded on the initialize exchange: %+v", inj)
	}
	added := strings.TrimPrefix(instr, "Use the tools in order.\nBe nice.")
	if inj[0].Tokens != CountTokens(added) || h.inj.Spent(h.conn.Session) != inj[0].Tokens {
		t.Errorf("tokens recorded %d, spent %d, added text has %d", inj[0].Tokens, h.inj.Spent(h.conn.Session), CountTokens(added))
	}
	if q := src.lastQueries(); len(q) == 0 || q[0].Server != "example" || !q[0].NoHit {
		t.Errorf("lessons not searched for this server without counting hits: %+v", q)
	}
}

func TestInitializeInstructionsShapes(t *testing.T) {
	tests := []struct {
		name, member string
		changed      bool
		prefix       string
	}{
		{"absent", ``, true, Marker},
		{"empty", `,"instructions":""`, true, Marker},
		{"not a string", `,"instructions":{"a":1}`, false, ""},
		{"null", `,"instructions":null`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &Injector{Source: &fakeSearcher{list: lessons()}})
			orig := initResp(tt.member)
			out := h.roundTrip(initReq, orig)
			if !tt.changed {
				if string(out) != orig {
					t.Fatalf("changed:\n%s\n%s", orig, out)
				}
				return
			}
			instr := gjson.GetBytes(out, "result.instructions")
			if !strings.HasPrefix(instr.String(), tt.prefix) || !strings.Contains(instr.String(), "Call login before fetch_report") {
				t.Fatalf("instructions %q", instr.String())
			}
			if tt.member == "" {
				// Created at the end of the result; all else unchanged.
				if want := strings.TrimSuffix(orig, `},"extra":true}`); !strings.HasPrefix(string(out), want) {
					t.Fatalf("bytes before the new member changed:\n%s\n%s", orig, out)
				}
			} else {
				sameExcept(t, []byte(orig), out, "result.instructions")
			}
		})
	}
}

func TestInitializeServerDiscover(t *testing.T) {
	h := newHarness(t, &Injector{Source: &fakeSearcher{list: lessons()}})
	out := h.roundTrip(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{}}`,
		`{"jsonrpc":"2.0","id":"d","result":{"supportedVersions":["2026-07-28"],"instructions":"hi"}}`)
	if !strings.Contains(gjson.GetBytes(out, "result.instructions").String(), "Call login before fetch_report") {
		t.Fatalf("server/discover instructions not injected: %s", out)
	}
}

func TestInitializeNoLessonsPointerOnly(t *testing.T) {
	h := newHarness(t, &Injector{Source: &fakeSearcher{}})
	out := h.roundTrip(initReq, initResp(`,"instructions":"x"`))
	instr := gjson.GetBytes(out, "result.instructions").String()
	if want := "x\n\n" + Marker + " Before a tool you are unsure of"; !strings.HasPrefix(instr, want) || strings.Contains(instr, "Lessons") {
		t.Fatalf("instructions = %q, want the pointer alone", instr)
	}
}

func TestInitializeDoesNotWaitForAStalledDaemon(t *testing.T) {
	src := &fakeSearcher{stall: true}
	inj := &Injector{Source: src, QueryTimeout: 5 * time.Second}
	h := newHarness(t, inj)
	h.conn.HookTimeout = 50 * time.Millisecond
	done := make(chan []byte)
	go func() { done <- h.roundTrip(initReq, initResp(`,"instructions":"x"`)) }()
	select {
	case out := <-done:
		instr := gjson.GetBytes(out, "result.instructions").String()
		if strings.Contains(instr, "Lessons") || !strings.Contains(instr, "query_hindsight") {
			t.Fatalf("instructions = %q, want the pointer alone", instr)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("initialize held back past the hook timeout")
	}
}

func TestPrefetchServesInitialize(t *testing.T) {
	src := &fakeSearcher{list: lessons()}
	inj := &Injector{Source: src, Server: "example"}
	inj.Prefetch(context.Background())
	n := len(src.lastQueries())
	h := newHarness(t, inj)
	out := h.roundTrip(initReq, initResp(""))
	if !strings.Contains(gjson.GetBytes(out, "result.instructions").String(), "Call login before fetch_report") {
		t.Fatalf("prefetched lessons not used: %s", out)
	}
	if got := len(src.lastQueries()); got != n {
		t.Errorf("initialize searched again (%d searches, want %d)", got, n)
	}
}

func TestPrefetchedLessonsExpire(t *testing.T) {
	src := &fakeSearcher{}
	inj := &Injector{Source: src, Server: "example", LessonsTTL: time.Nanosecond}
	inj.Prefetch(context.Background())
	src.mu.Lock()
	src.list = lessons()
	src.mu.Unlock()
	time.Sleep(time.Millisecond)
	h := newHarness(t, inj)
	out := h.roundTrip(initReq, initResp(""))
	if !strings.Contains(gjson.GetBytes(out, "result.instructions").String(), "Call login") {
		t.Fatalf("stale lessons not refreshed: %s", out)
	}
}

const listReq = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`

func TestToolsList(t *testing.T) {
	tools := func(names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, `{"name":"`+n+`","inputSchema":{"type":"object","x-unknown":{"deep":[1,2]}}}`)
		}
		return `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + strings.Join(parts, ", ") + `],"_meta":{"a":1}}}`
	}
	tests := []struct {
		name     string
		upstream []string
		want     string
	}{
		{"no clash", []string{"login", "fetch_report"}, "query_hindsight"},
		{"empty list", nil, "query_hindsight"},
		{"clash", []string{"query_hindsight", "login"}, "query_hindsight_2"},
		{"double clash", []string{"query_hindsight_2", "query_hindsight"}, "query_hindsight_3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := newHarness(t, &Injector{Source: &fakeSearcher{list: lessons()}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			orig := tools(tt.upstream...)
			out := h.roundTrip(listReq, orig)
			arr := gjson.GetBytes(out, "result.tools").Array()
			if len(arr) != len(tt.upstream)+1 {
				t.Fatalf("got %d tools, want %d: %s", len(arr), len(tt.upstream)+1, out)
			}
			added := arr[len(arr)-1]
			if added.Get("name").String() != tt.want {
				t.Fatalf("added tool %s, want %s", added.Get("name"), tt.want)
			}
			if !strings.Contains(added.Get("description").String(), "before a tool you are unsure of, and after an error") {
				t.Errorf("description does not say when to call it: %s", added.Get("description"))
			}
			if req := added.Get("inputSchema.required").Array(); len(req) != 1 || req[0].String() != "situation" {
				t.Errorf("inputSchema.required = %s", added.Get("inputSchema.required"))
			}
			for _, p := range []string{"situation", "tool_name", "task_type"} {
				if !added.Get("inputSchema.properties." + p).Exists() {
					t.Errorf("inputSchema lacks %s", p)
				}
			}
			// Every upstream byte is kept: only the new element is inserted
			// before the array's closing bracket.
			end := gjson.Get(orig, "result.tools").Index + len(gjson.Get(orig, "result.tools").Raw) - 1
			if !strings.HasPrefix(string(out), strings.TrimRight(orig[:end], " ")) || !strings.HasSuffix(string(out), orig[end:]) {
				t.Errorf("upstream bytes changed:\n%s\n%s", orig, out)
			}
			if tt.want != QueryToolName && !strings.Contains(logs.String(), tt.want) {
				t.Errorf("clash not logged: %s", logs.String())
			}
			// Calls to the new name are answered locally; an upstream
			// query_hindsight is still forwarded.
			h.local(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tt.want + `","arguments":{"situation":"about to fetch"}}}`)
			if tt.want != QueryToolName {
				if a := h.conn.FromClient([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"query_hindsight","arguments":{}}}`)); a.Forward == nil {
					t.Errorf("upstream query_hindsight not forwarded")
				}
			}
		})
	}
}

func TestToolsListPaginated(t *testing.T) {
	h := newHarness(t, &Injector{Source: &fakeSearcher{}})
	page1 := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"query_hindsight","inputSchema":{"type":"object"}}],"nextCursor":"p2"}}`
	if out := h.roundTrip(listReq, page1); string(out) != page1 {
		t.Fatalf("first page changed: %s", out)
	}
	out := h.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"p2"}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"login","inputSchema":{"type":"object"}}]}}`)
	if got := gjson.GetBytes(out, "result.tools.1.name").String(); got != "query_hindsight_2" {
		t.Fatalf("last page got %q, want query_hindsight_2 (clash on an earlier page): %s", got, out)
	}
}

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

func TestQueryHindsight(t *testing.T) {
	src := &fakeSearcher{list: lessons()}
	h := newHarness(t, &Injector{Source: src})
	text := answerText(t, h.local(callReq(5, "about to fetch the March report", "fetch_report")))
	blocks := experienceBlocks(text)
	if !strings.HasPrefix(text, Marker) || len(blocks) != 2 {
		t.Fatalf("answer:\n%s", text)
	}
	if !strings.HasPrefix(blocks[0], "1. fetch_report (error 401") || !strings.Contains(blocks[0], "Lesson: Call login before fetch_report") {
		t.Errorf("most relevant not first:\n%s", text)
	}
	if strings.Contains(text, "another server") {
		t.Errorf("experience of another server shown:\n%s", text)
	}
	q := src.lastQueries()
	if last := q[len(q)-1]; last.Server != "example" || last.Tool != "fetch_report" || !strings.Contains(last.Text, "March report") {
		t.Errorf("query = %+v", last)
	}
	ex := h.lastExchange()
	if !ex.Local || len(ex.Injected) != 1 || ex.Injected[0].Channel != ChannelQuery ||
		strings.Join(ex.Injected[0].ExperienceIDs, ",") != "e1,e5" || ex.Injected[0].Tokens != CountTokens(text) {
		t.Errorf("exchange = local %v injected %+v", ex.Local, ex.Injected)
	}
}

func TestQueryHindsightCaps(t *testing.T) {
	long := strings.Repeat("Always double-check the invoice currency against the customer's billing profile before sending. ", 40)
	var many []hindsight.ScoredExperience
	for i := range 10 {
		many = append(many, exp(fmt.Sprintf("m%d", i), "example", "send_invoice", "429", fmt.Sprintf("Lesson %d: %s", i, long), float64(10-i)))
	}
	tests := []struct {
		name       string
		list       []hindsight.ScoredExperience
		inj        *Injector
		wantBlocks int
		maxBlock   int
	}{
		{"three of many, long ones cut", many, &Injector{}, 3, DefaultMaxTokensPerLesson},
		{"smaller caps", many, &Injector{MaxExperiences: 2, MaxTokensPerLesson: 50}, 2, 50},
		{"budget cuts the list", many, &Injector{SessionBudget: 450}, 2, DefaultMaxTokensPerLesson},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inj := tt.inj
			inj.Source = &fakeSearcher{list: tt.list}
			h := newHarness(t, inj)
			text := answerText(t, h.local(callReq(1, "sending invoices", "send_invoice")))
			blocks := experienceBlocks(text)
			if len(blocks) != tt.wantBlocks {
				t.Fatalf("%d blocks, want %d:\n%s", len(blocks), tt.wantBlocks, text)
			}
			for i, b := range blocks {
				if n := CountTokens(b); n > tt.maxBlock {
					t.Errorf("block %d has %d tokens, cap %d", i, n, tt.maxBlock)
				}
				if !strings.HasPrefix(b, fmt.Sprintf("%d. send_invoice", i+1)) || !strings.Contains(b, fmt.Sprintf("Lesson: Lesson %d:", i)) {
					t.Errorf("block %d out of order or without its lesson:\n%s", i, b)
				}
				if !strings.HasSuffix(b, ellipsis) {
					t.Errorf("long block %d not marked as cut", i)
				}
			}
		})
	}
}

func TestSessionBudgetAcrossChannels(t *testing.T) {
	long := strings.Repeat("Wait for the rate limit window before calling again, and pass pause_ms. ", 30)
	var many []hindsight.ScoredExperience
	for i := range 8 {
		for _, tool := range []string{"fetch_report", "send_invoice"} {
			many = append(many, exp(fmt.Sprintf("%s%d", tool, i), "example", tool, "429", fmt.Sprintf("%s lesson %d: %s", tool, i, long), float64(20-i)))
		}
	}
	for _, budget := range []int{0, 300, 1500} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			h := newHarness(t, &Injector{Source: &fakeSearcher{list: many}, SessionBudget: budget})
			if budget == 0 {
				budget = DefaultSessionBudget
			}
			h.roundTrip(initReq, initResp(`,"instructions":"x"`))
			h.roundTrip(listReq, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`)
			for i := range 6 {
				h.local(callReq(100+i, "calling send_invoice", "send_invoice"))
				h.roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fetch_report","arguments":{}}}`, 200+i),
					fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"429 Too Many Requests"}],"isError":true}}`, 200+i))
			}
			total := 0
			for _, inj := range h.injected() {
				total += inj.Tokens
			}
			if total > budget || h.inj.Spent(h.conn.Session) != total {
				t.Fatalf("injected %d tokens (spent %d), budget %d", total, h.inj.Spent(h.conn.Session), budget)
			}
			if total < budget/2 {
				t.Errorf("injected only %d of a %d budget", total, budget)
			}
			if text := answerText(t, h.local(callReq(300, "calling send_invoice", "send_invoice"))); text != BudgetSpentText {
				t.Errorf("after the budget is spent, answer = %q", text)
			}
		})
	}
}

func TestQueryHindsightFallbacks(t *testing.T) {
	tests := []struct {
		name string
		src  Searcher
		want string
	}{
		{"nothing found", &fakeSearcher{}, NoExperienceText},
		{"nothing for this server", &fakeSearcher{list: lessons()[3:4]}, NoExperienceText},
		{"daemon down", &fakeSearcher{err: errors.New("dial unix hindsight.sock: connect: no such file")}, UnavailableText},
		{"daemon stalls", &fakeSearcher{stall: true}, UnavailableText},
		{"store unavailable", &fakeSearcher{err: fmt.Errorf("daemon: %w: connection refused (status 503)", hindsight.ErrStoreUnavailable)}, StoreUnavailableText},
		{"no source", nil, UnavailableText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &Injector{Source: tt.src, QueryTimeout: 100 * time.Millisecond})
			if got := answerText(t, h.local(callReq(1, "about to send", "send_invoice"))); got != tt.want {
				t.Fatalf("answer %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQueryHindsightFallsBackToServerWide(t *testing.T) {
	h := newHarness(t, &Injector{Source: &fakeSearcher{list: lessons()}})
	text := answerText(t, h.local(callReq(1, "about to delete a customer", "delete_customer")))
	if !strings.Contains(text, "Call login before fetch_report") {
		t.Fatalf("no server-wide experience when none is about the tool:\n%s", text)
	}
}

const errResp = `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"401 Unauthorized: no session, call login first"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"structuredContent":{"status":401,"text":"[Hindsight] must stay out"},"isError":true,"_meta":{"trace":"t"}}}`

const fetchReq = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fetch_report","arguments":{"month":"2026-03"}}}`

func TestErrorResultLessons(t *testing.T) {
	src := &fakeSearcher{list: append(lessons(),
		exp("e6", "example", "fetch_report", "401", "Log in again when the session expired.", 0.85),
		exp("e7", "example", "fetch_report", "401", "A third 401 lesson that exceeds the cap.", 0.84))}
	h := newHarness(t, &Injector{Source: src})
	out := h.roundTrip(fetchReq, errResp)
	items := gjson.GetBytes(out, "result.content").Array()
	if len(items) != 3 {
		t.Fatalf("content has %d items: %s", len(items), out)
	}
	added := items[2]
	text := added.Get("text").String()
	if added.Get("type").String() != "text" || !strings.HasPrefix(text, Marker+" Lessons from past runs about fetch_report") {
		t.Fatalf("added item %s", added.Raw)
	}
	if lines := strings.Split(text, "\n")[1:]; len(lines) != 2 || lines[0] != "- Call login before fetch_report; it answers 401 without a session. (seen in 1 task)" {
		t.Errorf("lessons %q, want the 2 best 401 lessons", lines)
	}
	if strings.Contains(text, "500") || strings.Contains(text, "another server") {
		t.Errorf("lessons of another error or server shown: %s", text)
	}
	// Everything but the inserted item is the server's bytes.
	content := gjson.Get(errResp, "result.content")
	end := content.Index + len(content.Raw) - 1
	if !bytes.HasPrefix(out, []byte(errResp[:end])) || !bytes.HasSuffix(out, []byte(errResp[end:])) {
		t.Errorf("bytes outside the new item changed:\n%s\n%s", errResp, out)
	}
	if sc := gjson.GetBytes(out, "result.structuredContent").Raw; sc != gjson.Get(errResp, "result.structuredContent").Raw {
		t.Errorf("structuredContent changed: %s", sc)
	}
	ex := h.lastExchange()
	if len(ex.Injected) != 1 || ex.Injected[0].Channel != ChannelErrorResult || strings.Join(ex.Injected[0].ExperienceIDs, ",") != "e1,e6" ||
		ex.Injected[0].Tokens != CountTokens(text) {
		t.Errorf("injected %+v", ex.Injected)
	}
	if !bytes.Equal(ex.Response, out) {
		t.Errorf("exchange does not hold the bytes relayed")
	}
}

// TestErrorResultRelevanceGate: a lesson line is appended to an error only
// when it is about that error — its template fits the error text — and
// above the confidence gate; sharing the tool is never enough.
func TestErrorResultRelevanceGate(t *testing.T) {
	withTpl := func(id, tpl string, conf float64) hindsight.ScoredExperience {
		e := exp(id, "example", "fetch_report", "", "Lesson "+id+" about fetch_report.", 0.9)
		e.ErrorTemplate, e.Confidence = tpl, conf
		return e
	}
	tests := []struct {
		name string
		exp  hindsight.ScoredExperience
		want bool
	}{
		{"same template", withTpl("a", "<*> Unauthorized: no session, call login first", 0.8), true},
		{"template with one drifted word", withTpl("b", "<*> Unauthorized: no token, call login first", 0.8), true},
		{"another error of the same tool", withTpl("c", "<*> Not Found: no report for month <*>", 0.9), false},
		{"same words, another length", withTpl("d", "<*> Unauthorized: call login first", 0.9), false},
		{"below the gate", withTpl("e", "<*> Unauthorized: no session, call login first", 0.5), false},
		{"no template, matching code", exp("f", "example", "fetch_report", "401", "Lesson f about fetch_report.", 0.9), true},
		{"no template, no code", exp("g", "example", "fetch_report", "", "Lesson g about fetch_report.", 0.9), false},
		{"same template, another tool", func() hindsight.ScoredExperience {
			e := withTpl("h", "<*> Unauthorized: no session, call login first", 0.8)
			e.Tool = "create_invoice"
			return e
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSearcher{list: []hindsight.ScoredExperience{tt.exp}}
			h := newHarness(t, &Injector{Source: src})
			out := h.roundTrip(fetchReq, errResp)
			got := len(gjson.GetBytes(out, "result.content").Array()) == 3
			if got != tt.want {
				t.Errorf("line appended: %v, want %v: %s", got, tt.want, out)
			}
			if q := src.lastQueries(); len(q) == 0 || q[len(q)-1].ErrorTemplate != "<*> Unauthorized: no session, call login first" {
				t.Errorf("query carries template %+v", q)
			}
		})
	}
}

func TestErrorResultUntouched(t *testing.T) {
	tests := []struct{ name, resp string }{
		{"success", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"401 rows"}],"isError":false}}`},
		{"no isError", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}`},
		{"protocol error", `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"401"}}`},
		{"no content", `{"jsonrpc":"2.0","id":7,"result":{"isError":true,"structuredContent":{"a":1}}}`},
		{"no lesson for this error", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"403 Forbidden"}],"isError":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &Injector{Source: &fakeSearcher{list: lessons()[:1]}})
			if out := h.roundTrip(fetchReq, tt.resp); string(out) != tt.resp {
				t.Fatalf("changed:\n%s\n%s", tt.resp, out)
			}
		})
	}
}

func TestErrorResultDaemonDown(t *testing.T) {
	for _, src := range []*fakeSearcher{{err: errors.New("connection refused")}, {stall: true}} {
		h := newHarness(t, &Injector{Source: src})
		h.conn.HookTimeout = 50 * time.Millisecond
		if out := h.roundTrip(fetchReq, errResp); string(out) != errResp {
			t.Fatalf("changed with the daemon down:\n%s", out)
		}
	}
}

func TestChannelsOff(t *testing.T) {
	toolsResp := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"login","inputSchema":{"type":"object"}}]}}`
	tests := []struct {
		name                    string
		inj                     *Injector
		instr, tool, errLessons bool
	}{
		{"all on", &Injector{}, true, true, true},
		{"instructions off", &Injector{NoInstructions: true}, false, true, true},
		{"error results off", &Injector{NoErrorResults: true}, true, true, false},
		{"query tool off", &Injector{NoQueryTool: true}, true, false, true},
		{"all off", &Injector{NoInstructions: true, NoErrorResults: true, NoQueryTool: true}, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inj := tt.inj
			inj.Source = &fakeSearcher{list: lessons()}
			h := newHarness(t, inj)
			orig := initResp(`,"instructions":"x"`)
			instr := gjson.GetBytes(h.roundTrip(initReq, orig), "result.instructions").String()
			if got := strings.Contains(instr, Marker); got != tt.instr {
				t.Errorf("instructions injected = %v: %q", got, instr)
			}
			if tt.instr && strings.Contains(instr, "query_hindsight") != tt.tool {
				t.Errorf("pointer to the query tool = %v with the tool on = %v", !tt.tool, tt.tool)
			}
			list := h.roundTrip(listReq, toolsResp)
			if got := strings.Contains(string(list), QueryToolName); got != tt.tool {
				t.Errorf("query tool listed = %v", got)
			}
			a := h.conn.FromClient([]byte(callReq(9, "x", "")))
			if got := a.Local != nil; got != tt.tool {
				t.Errorf("query tool answered locally = %v (forwarded %v)", got, a.Forward != nil)
			}
			out := h.roundTrip(fetchReq, errResp)
			if got := len(gjson.GetBytes(out, "result.content").Array()) == 3; got != tt.errLessons {
				t.Errorf("error lessons injected = %v", got)
			}
			if !tt.instr && !tt.tool && !tt.errLessons && len(h.injected()) != 0 {
				t.Errorf("recorded injections with every channel off: %+v", h.injected())
			}
		})
	}
}

func TestTruncateTokens(t *testing.T) {
	tests := []struct {
		in  string
		max int
	}{
		{"short", 200},
		{strings.Repeat("word ", 500), 200},
		{strings.Repeat("日本語のテキスト", 300), 37},
		{strings.Repeat("🙂", 300), 5},
		{strings.Repeat("x", 10), 0},
	}
	for _, tt := range tests {
		out := TruncateTokens(tt.in, tt.max)
		if n := CountTokens(out); n > tt.max {
			t.Errorf("TruncateTokens(%.20q, %d) has %d tokens", tt.in, tt.max, n)
		}
		if !strings.HasPrefix(tt.in, strings.TrimSuffix(out, ellipsis)) && out != "" {
			t.Errorf("TruncateTokens(%.20q) = %.40q is not a prefix", tt.in, out)
		}
		if CountTokens(tt.in) > tt.max && tt.max > 2 && !strings.HasSuffix(out, ellipsis) {
			t.Errorf("cut text not marked: %.40q", out)
		}
	}
}

func TestSameError(t *testing.T) {
	tests := []struct {
		code, text string
		want       bool
	}{
		{"", "anything", true},
		{"401", "401 Unauthorized", true},
		{"http_401", "HTTP 401", true},
		{"ENOENT", "open x: enoent", true},
		{"429", "401 Unauthorized", false},
		{"--", "x", true},
	}
	for _, tt := range tests {
		if got := sameError(tt.code, tt.text); got != tt.want {
			t.Errorf("sameError(%q, %q) = %v", tt.code, tt.text, got)
		}
	}
}

// FuzzHooks feeds arbitrary results to every rewriting hook: they must not
// panic and must return nil or valid JSON that keeps structuredContent.
func FuzzHooks(f *testing.F) {
	f.Add([]byte(gjson.Get(errResp, "result").Raw), "fetch_report")
	f.Add([]byte(`{"tools":[{"name":"query_hindsight"}],"nextCursor":""}`), "x")
	f.Add([]byte(`{"instructions":"a\u00e9\n","content":"x","isError":true}`), "")
	f.Add([]byte(`{"content":[{"type":"text","text":1}],"isError":1}`), "t")
	inj := &Injector{Source: &fakeSearcher{list: lessons()}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.Fuzz(func(t *testing.T, result []byte, tool string) {
		if !json.Valid(result) {
			return
		}
		s := &proxy.Session{ID: "f", Server: "example"}
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool}})
		ex := &proxy.Exchange{Session: s, Method: "tools/call", Request: req}
		ctx := context.Background()
		for _, out := range []json.RawMessage{
			inj.Initialize(ctx, s, result),
			inj.ToolsList(ctx, s, result),
			inj.ToolResult(ctx, ex, result),
		} {
			if out == nil {
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON from %s: %s", result, out)
			}
			if a, b := gjson.GetBytes(result, "structuredContent").Raw, gjson.GetBytes(out, "structuredContent").Raw; a != b {
				t.Fatalf("structuredContent changed: %s → %s", a, b)
			}
		}
		if h := inj.ToolCall(s, QueryToolName, result); h != nil {
			b, err := h(ctx)
			if err != nil || !json.Valid(b) {
				t.Fatalf("query answer %s, %v", b, err)
			}
		}
	})
}

// BenchmarkToolResult measures a tools/call round trip through proxy.Conn:
// without hooks (the baseline), with the injector on a successful result
// (it only checks isError), and on a failed one (search, format, splice).
func BenchmarkToolResult(b *testing.B) {
	okResp := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Billable usage for 2026-03"}],"structuredContent":{"month":"2026-03"},"isError":false}}`
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, bc := range []struct {
		name string
		inj  *Injector
		resp string
	}{
		{"baseline-no-hooks", nil, okResp},
		{"injector-success", &Injector{Source: &fakeSearcher{list: lessons()}, Logger: quiet}, okResp},
		{"injector-error", &Injector{Source: &fakeSearcher{list: lessons()}, Logger: quiet, SessionBudget: 1 << 30}, errResp},
	} {
		b.Run(bc.name, func(b *testing.B) {
			hooks := &proxy.Hooks{}
			if bc.inj != nil {
				bc.inj.Install(hooks)
			}
			conn := &proxy.Conn{Hooks: hooks, Session: &proxy.Session{ID: "b", Server: "example"}, Logger: quiet}
			req, resp := []byte(fetchReq), []byte(bc.resp)
			b.ReportAllocs()
			for b.Loop() {
				conn.FromClient(req)
				if out := conn.FromServer(resp); len(out) < len(resp) {
					b.Fatal("short answer")
				}
			}
		})
	}
}

// TestOneLineStripsControls: escape sequences, control characters and
// bidirectional overrides never reach an agent.
func TestOneLineStripsControls(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Call login\x1b[31m first\x1b[0m.", "Call login first."},
		{"a\x1b]0;title\x07b", "ab"},
		{"x\u202Egnp.exe\u202C y", "xgnp.exe y"},
		{"tab\there\nnew\x00line\x7f", "tab here newline"},
		{"plain text stays", "plain text stays"},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
