package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// exchangeLog collects the exchanges a Conn emits.
type exchangeLog struct {
	mu  sync.Mutex
	exs []*Exchange
}

func (l *exchangeLog) add(ex *Exchange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exs = append(l.exs, ex)
}

func (l *exchangeLog) all() []*Exchange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Exchange(nil), l.exs...)
}

// connUnderTest returns a Conn with hooks h (Exchange recorded into the
// returned log) and a logger writing into the returned buffer.
func connUnderTest(h Hooks) (*Conn, *exchangeLog, *testkit.SyncBuffer) {
	log := &exchangeLog{}
	if h.Exchange == nil {
		h.Exchange = log.add
	}
	var buf testkit.SyncBuffer
	return &Conn{
		Hooks:   &h,
		Session: &Session{ID: "s1", Server: "srv", Transport: "stdio"},
		Logger:  slog.New(slog.NewTextHandler(&buf, nil)),
	}, log, &buf
}

func mustForward(t *testing.T, a Action, want string) {
	t.Helper()
	if string(a.Forward) != want || a.Reply != nil || a.Local != nil {
		t.Fatalf("action = forward %q reply %q local %v; want forward %q", a.Forward, a.Reply, a.Local != nil, want)
	}
}

func TestConnMatchesRequestsAndResponses(t *testing.T) {
	c, log, _ := connUnderTest(Hooks{})
	reqs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"1","method":"resources/list"}`, // a string id is another id
		`{"jsonrpc":"2.0","id":1.0,"method":"prompts/list"}`,
	}
	for _, r := range reqs {
		mustForward(t, c.FromClient([]byte(r)), r)
	}
	if c.Pending() != 3 {
		t.Fatalf("Pending = %d, want 3", c.Pending())
	}
	resps := []string{
		`{"jsonrpc":"2.0","id":"1","result":{"resources":[]}}`,
		`{"jsonrpc":"2.0","id":1.0,"error":{"code":-32601,"message":"no prompts"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`,
		`{"jsonrpc":"2.0","id":42,"result":{}}`, // answers nothing we saw
	}
	for _, r := range resps {
		if got := c.FromServer([]byte(r)); string(got) != r {
			t.Fatalf("FromServer(%s) = %s", r, got)
		}
	}
	exs := log.all()
	if len(exs) != 3 || c.Pending() != 0 {
		t.Fatalf("%d exchanges, %d pending; want 3, 0", len(exs), c.Pending())
	}
	wantMethod := []string{"resources/list", "prompts/list", "tools/list"}
	for i, ex := range exs {
		if ex.Method != wantMethod[i] || string(ex.Response) != resps[i] || ex.Direction != hindsight.ClientToServer {
			t.Errorf("exchange %d: %s %s %s", i, ex.Method, ex.Direction, ex.Response)
		}
		if ex.Ended.Before(ex.Started) || ex.Session != c.Session {
			t.Errorf("exchange %d: times or session wrong", i)
		}
	}

	// Server → agent requests are matched against the agent's responses.
	srvReq := `{"jsonrpc":"2.0","id":0,"method":"sampling/createMessage","params":{"messages":[]}}`
	if got := c.FromServer([]byte(srvReq)); string(got) != srvReq {
		t.Fatalf("server request changed: %s", got)
	}
	ans := `{"jsonrpc":"2.0","id":0,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"x-new":1}}`
	mustForward(t, c.FromClient([]byte(ans)), ans)
	exs = log.all()
	if last := exs[len(exs)-1]; len(exs) != 4 || last.Method != "sampling/createMessage" ||
		last.Direction != hindsight.ServerToClient || string(last.Response) != ans {
		t.Fatalf("server request exchange: %+v", last)
	}
}

func TestConnRewriteKeepsEverythingButResult(t *testing.T) {
	newTools := json.RawMessage(`{"tools":[{"name":"query_hindsight"}]}`)
	var gotResult string
	h := Hooks{
		Initialize: func(ctx context.Context, s *Session, result json.RawMessage) json.RawMessage {
			return json.RawMessage(strings.Replace(string(result), `"instructions":"a"`, `"instructions":"a+b"`, 1))
		},
		ToolsList: func(ctx context.Context, s *Session, result json.RawMessage) json.RawMessage {
			gotResult = string(result)
			return newTools
		},
		ToolResult: func(ctx context.Context, ex *Exchange, result json.RawMessage) json.RawMessage {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("ToolResult ctx has no deadline")
			}
			return nil // keep
		},
	}
	tests := []struct {
		name, req, resp, want string
	}{
		{
			name: "tools/list: spacing, order, unknown members and _meta kept",
			req:  `{"jsonrpc":"2.0","id":"t","method":"tools/list"}`,
			resp: `{ "result" :  {"tools":[{"name":"a","inputSchema":{"anyOf":[{}]}}]} , "jsonrpc":"2.0","_meta":{"m":1}, "id":"t","x-new":{"y":[1,2]} }`,
			want: `{ "result" :  ` + string(newTools) + ` , "jsonrpc":"2.0","_meta":{"m":1}, "id":"t","x-new":{"y":[1,2]} }`,
		},
		{
			name: "initialize",
			req:  `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"c","version":"9"},"protocolVersion":"2025-11-25"}}`,
			resp: `{"jsonrpc":"2.0","id":1,"result":{"instructions":"a","x":"é"}}`,
			want: `{"jsonrpc":"2.0","id":1,"result":{"instructions":"a+b","x":"é"}}`,
		},
		{
			name: "server/discover uses the Initialize hook",
			req:  `{"jsonrpc":"2.0","id":2,"method":"server/discover"}`,
			resp: `{"jsonrpc":"2.0","id":2,"result":{"instructions":"a"}}`,
			want: `{"jsonrpc":"2.0","id":2,"result":{"instructions":"a+b"}}`,
		},
		{
			name: "a hook returning nil keeps the bytes",
			req:  `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}`,
			resp: `{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":true} }`,
			want: `{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":true} }`,
		},
		{
			name: "error responses reach no hook",
			req:  `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
			resp: `{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"no"}}`,
			want: `{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"no"}}`,
		},
		{
			name: "other methods reach no hook",
			req:  `{"jsonrpc":"2.0","id":5,"method":"resources/list"}`,
			resp: `{"jsonrpc":"2.0","id":5,"result":{"instructions":"a"}}`,
			want: `{"jsonrpc":"2.0","id":5,"result":{"instructions":"a"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, log, _ := connUnderTest(h)
			mustForward(t, c.FromClient([]byte(tt.req)), tt.req)
			respBytes := []byte(tt.resp)
			got := c.FromServer(respBytes)
			if string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			if string(respBytes) != tt.resp {
				t.Fatalf("the input was modified in place: %s", respBytes)
			}
			if exs := log.all(); len(exs) != 1 || string(exs[0].Response) != tt.want {
				t.Fatalf("exchange response is not what was relayed")
			}
		})
	}
	if gotResult != `{"tools":[{"name":"a","inputSchema":{"anyOf":[{}]}}]}` {
		t.Errorf("ToolsList saw %s", gotResult)
	}
	c, _, _ := connUnderTest(h)
	c.FromClient([]byte(tests[1].req))
	if name, ver, proto := c.Session.Client(); name != "c" || ver != "9" || proto != "2025-11-25" {
		t.Errorf("client = %q %q %q", name, ver, proto)
	}
}

func TestConnBadHooksAreIgnored(t *testing.T) {
	const req = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	const resp = `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`
	tests := []struct {
		name    string
		hook    func(ctx context.Context, s *Session, result json.RawMessage) json.RawMessage
		want    string
		wantLog string
	}{
		{"panic", func(context.Context, *Session, json.RawMessage) json.RawMessage { panic("boom") }, resp, "hook panicked"},
		{"invalid JSON", func(context.Context, *Session, json.RawMessage) json.RawMessage { return json.RawMessage(`{"tools":[`) }, resp, "invalid JSON"},
		{"pretty JSON is compacted", func(context.Context, *Session, json.RawMessage) json.RawMessage {
			return json.RawMessage("{\n  \"tools\": [\r\n  ]\n}")
		}, `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, ""},
		{"slow hook is bounded by its ctx", func(ctx context.Context, _ *Session, r json.RawMessage) json.RawMessage {
			<-ctx.Done()
			return nil
		}, resp, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, log, logs := connUnderTest(Hooks{ToolsList: tt.hook})
			c.HookTimeout = 10 * time.Millisecond
			c.FromClient([]byte(req))
			if got := c.FromServer([]byte(resp)); string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log lacks %q:\n%s", tt.wantLog, logs)
			}
			if len(log.all()) != 1 {
				t.Errorf("exchange not emitted")
			}
		})
	}
	// A panicking Exchange hook breaks nothing either.
	c, _, logs := connUnderTest(Hooks{Exchange: func(*Exchange) { panic("exchange boom") }})
	c.FromClient([]byte(req))
	if got := c.FromServer([]byte(resp)); string(got) != resp {
		t.Fatalf("got %s", got)
	}
	if !strings.Contains(logs.String(), "exchange hook panicked") {
		t.Errorf("panic not logged")
	}
}

func TestConnCancellation(t *testing.T) {
	t.Run("agent cancels a forwarded request", func(t *testing.T) {
		c, log, _ := connUnderTest(Hooks{})
		c.FromClient([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}`))
		cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`
		mustForward(t, c.FromClient([]byte(cancel)), cancel)
		exs := log.all()
		if len(exs) != 1 || !exs[0].Cancelled || exs[0].Response != nil || c.Pending() != 0 {
			t.Fatalf("exchanges %+v pending %d", exs, c.Pending())
		}
		late := `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`
		if got := c.FromServer([]byte(late)); string(got) != late {
			t.Fatalf("a late answer is relayed as is, got %s", got)
		}
		if len(log.all()) != 1 {
			t.Fatalf("late answer emitted a second exchange")
		}
	})
	t.Run("the agent's cancellation is recorded before it is relayed", func(t *testing.T) {
		var recorded []*Exchange
		c, log, _ := connUnderTest(Hooks{Record: func(exs []*Exchange) {
			recorded = append(recorded, exs...)
			for _, ex := range exs {
				ex.Recorded = true
			}
		}})
		c.FromClient([]byte(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"slow"}}`))
		c.FromServer([]byte(`{"jsonrpc":"2.0","id":"e2","method":"roots/list"}`))
		if len(recorded) != 0 {
			t.Fatalf("Record saw %d exchanges before any completed", len(recorded))
		}
		mustForward(t, c.FromClient([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8}}`)),
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8}}`)
		if len(recorded) != 1 || !recorded[0].Cancelled || string(recorded[0].ID) != "8" {
			t.Fatalf("Record saw %+v; want the cancelled call", recorded)
		}
		c.FromServer([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"e2"}}`))
		if len(recorded) != 1 {
			t.Errorf("Record saw the server's cancellation of its own request (%d exchanges); it answers nothing to the agent", len(recorded))
		}
		if exs := log.all(); len(exs) != 2 || !exs[0].Recorded || exs[1].Recorded {
			t.Errorf("Exchange saw %d exchanges, want the recorded cancelled call then the server's", len(exs))
		}
	})
	t.Run("server cancels its own request", func(t *testing.T) {
		c, log, _ := connUnderTest(Hooks{})
		c.FromServer([]byte(`{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{}}`))
		cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"e1"}}`
		if got := c.FromServer([]byte(cancel)); string(got) != cancel {
			t.Fatalf("got %s", got)
		}
		exs := log.all()
		if len(exs) != 1 || !exs[0].Cancelled || exs[0].Direction != hindsight.ServerToClient {
			t.Fatalf("exchanges %+v", exs)
		}
	})
	t.Run("a cancel for an unknown id is relayed", func(t *testing.T) {
		c, log, _ := connUnderTest(Hooks{})
		cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`
		mustForward(t, c.FromClient([]byte(cancel)), cancel)
		if len(log.all()) != 0 {
			t.Fatal("exchange emitted for nothing")
		}
	})
	t.Run("agent cancels a local call before it runs", func(t *testing.T) {
		c, log, _ := connUnderTest(Hooks{ToolCall: func(*Session, string, json.RawMessage) LocalHandler {
			return func(ctx context.Context) (json.RawMessage, error) {
				t.Error("handler ran after cancel")
				return json.RawMessage(`{}`), nil
			}
		}})
		a := c.FromClient([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"query_hindsight"}}`))
		b := c.FromClient([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`))
		if b.Forward != nil || b.Reply != nil {
			t.Fatalf("cancel of a local call must stay in the sidecar: %+v", b)
		}
		if got := a.Local(context.Background()); got != nil {
			t.Fatalf("cancelled local call answered %s", got)
		}
		if exs := log.all(); len(exs) != 1 || !exs[0].Cancelled || !exs[0].Local {
			t.Fatalf("exchanges %+v", exs)
		}
	})
	t.Run("agent cancels a running local call", func(t *testing.T) {
		started := make(chan struct{})
		c, log, _ := connUnderTest(Hooks{ToolCall: func(*Session, string, json.RawMessage) LocalHandler {
			return func(ctx context.Context) (json.RawMessage, error) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}})
		a := c.FromClient([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"query_hindsight"}}`))
		out := make(chan []byte)
		go func() { out <- a.Local(context.Background()) }()
		<-started
		c.FromClient([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`))
		if got := <-out; got != nil {
			t.Fatalf("cancelled local call answered %s", got)
		}
		if exs := log.all(); len(exs) != 1 || !exs[0].Cancelled {
			t.Fatalf("exchanges %+v", exs)
		}
	})
}

func TestConnProgress(t *testing.T) {
	c, log, _ := connUnderTest(Hooks{})
	c.FromClient([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"long","_meta":{"progressToken":"tok"}}}`))
	c.FromClient([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"other","_meta":{"progressToken":2}}}`))
	for i := 0; i < 3; i++ {
		n := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":1}}`
		if got := c.FromServer([]byte(n)); string(got) != n {
			t.Fatalf("progress changed: %s", got)
		}
	}
	c.FromServer([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"2","progress":1}}`)) // "2" is not 2
	c.FromServer([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	c.FromServer([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":2}}`)) // after the end
	c.FromServer([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":2,"progress":1}}`))
	c.FromServer([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`))
	exs := log.all()
	if len(exs) != 2 || exs[0].Notifications != 3 || exs[1].Notifications != 1 {
		t.Fatalf("notifications: %d %d, want 3 1", exs[0].Notifications, exs[1].Notifications)
	}
}

func TestConnFailPending(t *testing.T) {
	c, log, _ := connUnderTest(Hooks{})
	c.FromClient([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}`))
	c.FromClient([]byte(`{"jsonrpc":"2.0","id":"two","method":"resources/read"}`))
	c.FromServer([]byte(`{"jsonrpc":"2.0","id":9,"method":"roots/list"}`))
	out := c.FailPending(`MCP server "srv" exited (exit status 3)`)
	if len(out) != 2 || c.Pending() != 0 {
		t.Fatalf("%d responses, %d pending", len(out), c.Pending())
	}
	ids := map[string]bool{}
	for _, resp := range out {
		var r struct {
			ID    json.RawMessage
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(resp, &r); err != nil {
			t.Fatal(err)
		}
		ids[string(r.ID)] = true
		if r.Error.Code != CodeServerUnavailable || !strings.Contains(r.Error.Message, "exit status 3") || !strings.Contains(r.Error.Message, `"srv"`) {
			t.Errorf("error %+v", r.Error)
		}
	}
	if !ids["1"] || !ids[`"two"`] {
		t.Errorf("ids %v", ids)
	}
	for _, ex := range log.all() {
		if ex.Failure == "" || ex.Response == nil {
			t.Errorf("exchange %s: failure %q", ex.Method, ex.Failure)
		}
	}
	// Nothing is left to match: late answers are relayed, not emitted again.
	c.FromServer([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	c.FromClient([]byte(`{"jsonrpc":"2.0","id":9,"result":{"roots":[]}}`))
	if len(log.all()) != 2 {
		t.Fatalf("%d exchanges, want 2", len(log.all()))
	}
	if out := c.FailPending("again"); len(out) != 0 {
		t.Fatalf("second FailPending answered %d", len(out))
	}
	// The Conn keeps working.
	c.FromClient([]byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}`))
	if c.Pending() != 1 {
		t.Fatal("Conn unusable after FailPending")
	}
}

func TestConnMalformedInput(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		forward string
		reply   string
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":1,"method":`, "",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"}}`},
		{"long garbage is cut in the message", strings.Repeat("x", 200), "",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: ` + strings.Repeat("x", 80) + `…"}}`},
		{"no version, readable id", `{"id":5,"method":"tools/list"}`, "",
			`{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: invalid request: not a JSON-RPC 2.0 message"}}`},
		{"object id: answered with a null id", `{"jsonrpc":"2.0","id":{"a":1},"method":"x"}`, "",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string, a number or null"}}`},
		{"array id: answered with a null id", `{"jsonrpc":"2.0","id":[1,2],"method":"tools/call","params":{}}`, "",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string, a number or null"}}`},
		{"boolean id: answered with a null id", `{"jsonrpc":"2.0","id":true,"method":"x"}`, "",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the id must be a string, a number or null"}}`},
		{"jsonrpc 1.0: answered with its id", `{"jsonrpc":"1.0","id":"a-1","method":"tools/list"}`, "",
			`{"jsonrpc":"2.0","id":"a-1","error":{"code":-32600,"message":"Invalid Request: invalid request: not a JSON-RPC 2.0 message"}}`},
		{"invalid notification: not answered", `{"jsonrpc":"1.0","method":"notifications/x"}`, "", ""},
		{"scalar: answered with a null id", `42`, "",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: invalid request: not a JSON-RPC 2.0 message"}}`},
		{"batch relayed unchanged", `[{"jsonrpc":"2.0","id":1,"method":"ping"}, {"jsonrpc":"2.0","method":"x"}]`,
			`[{"jsonrpc":"2.0","id":1,"method":"ping"}, {"jsonrpc":"2.0","method":"x"}]`, ""},
		{"unknown method relayed", `{"jsonrpc":"2.0","id":6,"method":"vendor/new","params":{"x-y":[]}}`,
			`{"jsonrpc":"2.0","id":6,"method":"vendor/new","params":{"x-y":[]}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, _ := connUnderTest(Hooks{})
			a := c.FromClient([]byte(tt.in))
			if string(a.Forward) != tt.forward || string(a.Reply) != tt.reply || a.Local != nil {
				t.Fatalf("forward %s\nreply %s\nwant forward %s\nreply %s", a.Forward, a.Reply, tt.forward, tt.reply)
			}
			if a.Reply != nil {
				if _, err := Parse(a.Reply); err != nil {
					t.Fatalf("reply does not parse: %v", err)
				}
			}
		})
	}
}

func TestConnFromServerMalformed(t *testing.T) {
	c, _, logs := connUnderTest(Hooks{})
	if got := c.FromServer([]byte("Server listening on stdio")); got != nil {
		t.Fatalf("non-JSON from the server relayed: %s", got)
	}
	if !strings.Contains(logs.String(), "Server listening on stdio") {
		t.Errorf("skipped line not logged")
	}
	for _, in := range []string{`{"id":1,"result":{}}`, `[{"jsonrpc":"2.0","method":"a"}]`, `{"jsonrpc":"2.0","method":"x/new","params":{"_meta":{}}}`} {
		if got := c.FromServer([]byte(in)); string(got) != in {
			t.Errorf("FromServer(%s) = %s", in, got)
		}
	}
}

func TestConnHandshake(t *testing.T) {
	c, _, _ := connUnderTest(Hooks{})
	if a, b := c.Handshake(); a != nil || b != nil {
		t.Fatal("handshake before any")
	}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}}}}`
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	c.FromClient([]byte(init))
	c.FromClient([]byte(note))
	if a, b := c.Handshake(); string(a) != init || string(b) != note {
		t.Fatalf("handshake %s %s", a, b)
	}
}

// TestConnConcurrent drives both directions at once; run with -race.
func TestConnConcurrent(t *testing.T) {
	c, log, _ := connUnderTest(Hooks{ToolResult: func(ctx context.Context, ex *Exchange, r json.RawMessage) json.RawMessage { return r }})
	const n = 200
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			c.FromClient([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"_meta":{"progressToken":` + strconv.Itoa(i) + `}}}`))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			c.FromServer([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + strconv.Itoa(i) + `}}`))
			c.FromServer([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{}}`))
		}
	}()
	wg.Wait()
	c.FailPending("done")
	if got := len(log.all()); got != n {
		t.Fatalf("%d exchanges, want %d", got, n)
	}
}

// FuzzConn feeds arbitrary lines to both sides of a Conn with rewriting
// hooks installed, and checks that nothing panics, that the Conn relays
// what it does not rewrite unchanged, that what it writes itself is a valid
// JSON-RPC response, and that FailPending answers everything left.
func FuzzConn(f *testing.F) {
	for _, s := range []string{
		"c{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\ns{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}",
		"c{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":\"q\",\"_meta\":{\"progressToken\":1}}}\ns{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1}}\nc{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"a\"}}",
		"s{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"roots/list\"}\nc{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"roots\":[]}}\nc[1,2]\ncgarbage\nc{\"id\":9}",
		"c{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"clientInfo\":{\"name\":\"x\"}}}\ns{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"instructions\":\"i\"},\"x\":1}",
		"c{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"local\"}}\nc{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := Hooks{
			Initialize: func(ctx context.Context, s *Session, r json.RawMessage) json.RawMessage {
				return json.RawMessage(`{"instructions":"x"}`)
			},
			ToolsList:  func(ctx context.Context, s *Session, r json.RawMessage) json.RawMessage { return r },
			ToolResult: func(ctx context.Context, ex *Exchange, r json.RawMessage) json.RawMessage { return nil },
			ToolCall: func(s *Session, name string, params json.RawMessage) LocalHandler {
				if name != "local" {
					return nil
				}
				return func(ctx context.Context) (json.RawMessage, error) { return json.RawMessage(`{"content":[]}`), nil }
			},
		}
		c, _, _ := connUnderTest(h)
		for _, line := range bytes.Split(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			side, msg := line[0], line[1:]
			in := string(msg)
			if side == 'c' {
				a := c.FromClient(msg)
				if a.Forward != nil && string(a.Forward) != strings.TrimRight(in, "\r\n \t") {
					t.Fatalf("forwarded %q for %q", a.Forward, in)
				}
				if a.Reply != nil {
					if m, err := Parse(a.Reply); err != nil || m.Kind != KindResponse {
						t.Fatalf("reply %q does not parse as a response: %v", a.Reply, err)
					}
				}
				if a.Local != nil {
					if out := a.Local(context.Background()); out != nil {
						if m, err := Parse(out); err != nil || m.Kind != KindResponse {
							t.Fatalf("local answer %q: %v", out, err)
						}
					}
				}
				continue
			}
			out := c.FromServer(msg)
			if out != nil && string(out) != strings.TrimRight(in, "\r\n \t") && !json.Valid(out) {
				t.Fatalf("rewrote %q into invalid JSON %q", in, out)
			}
		}
		for _, resp := range c.FailPending("gone") {
			if m, err := Parse(resp); err != nil || m.Kind != KindResponse {
				t.Fatalf("FailPending answer %q: %v", resp, err)
			}
		}
		if c.Pending() != 0 {
			t.Fatal("requests left after FailPending")
		}
	})
}
