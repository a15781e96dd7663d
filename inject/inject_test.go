package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

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
