package replay

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// st builds a recorded step of server "demo".
func st(idx int, method, tool, args, result string) hindsight.Step {
	s := hindsight.Step{Server: "demo", StepIndex: idx, Method: method, Tool: tool, Direction: hindsight.ClientToServer}
	if args != "" {
		s.Arguments = json.RawMessage(args)
	}
	if result != "" {
		s.Result = json.RawMessage(result)
		s.IsError = gjson.Get(result, "isError").Bool()
	}
	return s
}

const injectedTool = `{"name":"query_hindsight","title":"Query Hindsight","description":"Hindsight's memory of past runs","inputSchema":{"type":"object"}},` +
	`{"name":"trigger_hindsight","title":"Trigger Hindsight","description":"End the task now","inputSchema":{"type":"object"}}`

// corpus is a recorded session with everything Hindsight adds.
func corpus() []hindsight.Step {
	steps := []hindsight.Step{
		st(0, "initialize", "", `{"protocolVersion":"2025-11-25"}`,
			`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{},"prompts":{}},"serverInfo":{"name":"demo-server","version":"1.2.3"},"instructions":"Use echo.\n\n[Hindsight] Lessons learned in past runs with this server:\n- do X"}`),
		st(1, "tools/list", "", `{}`, `{"tools":[{"name":"zeta","inputSchema":{"type":"object"}},{"name":"echo","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},`+injectedTool+`]}`),
		st(2, "tools/call", "echo", `{"message":"one"}`, `{"content":[{"type":"text","text":"echo: one"}]}`),
		st(3, "tools/call", "echo", `{"message":"one"}`, `{"content":[{"type":"text","text":"echo: one again"}]}`),
		st(4, "tools/call", "zeta", `{"token":"[REDACTED:key:token]","n":2}`, `{"content":[{"type":"text","text":"zeta ok"}],"structuredContent":{"ok":true}}`),
		st(5, "tools/call", "zeta", `{"n":404}`, `{"content":[{"type":"text","text":"not found: 404"},{"type":"text","text":"[Hindsight] Lessons from past runs about zeta and this error:\n- use n<100"}],"isError":true}`),
		st(6, "tools/call", "query_hindsight", `{"situation":"x"}`, `{"content":[{"type":"text","text":"[Hindsight] No relevant past experience"}]}`),
		st(7, "tools/call", "big", `{}`, `{"content":[{"type":"text","text":"cut"}]}`),
		st(8, "tools/call", "broken", `{}`, ``),
		st(9, "sampling/createMessage", "", `{}`, `{"role":"assistant"}`),
		st(10, "resources/read", "", `{"uri":"demo://a"}`, `{"contents":[{"uri":"demo://a","text":"A"}]}`),
		st(11, "prompts/get", "", `{"name":"greet","arguments":{"who":"Ada"}}`, `{"messages":[{"role":"user","content":{"type":"text","text":"Hello Ada"}}]}`),
		st(12, "resources/list", "", `{}`, `{"resources":[{"uri":"demo://a","name":"a"}]}`),
	}
	steps[5].Injected = []hindsight.Injection{{Channel: "error_result", Tokens: 10}}
	steps[6].Local = true
	steps[7].Truncated = []hindsight.Truncation{{Field: "result", OriginalSize: 1 << 20}}
	steps[8].Error = &hindsight.RPCError{Code: -32042, Message: "broken tool"}
	steps[9].Direction = hindsight.ServerToClient
	return steps
}

func TestNewStrips(t *testing.T) {
	rec, err := New(corpus(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(rec.Initialize, "instructions").String(); got != "Use echo." {
		t.Errorf("instructions = %q", got)
	}
	if rec.Skipped != 2 {
		t.Errorf("skipped %d steps, want 2 (local, server to client)", rec.Skipped)
	}
	for _, c := range rec.Calls {
		if c.Tool == "query_hindsight" {
			t.Errorf("the local query_hindsight call was kept")
		}
		if strings.Contains(string(c.Result), "[Hindsight]") {
			t.Errorf("step %d keeps Hindsight's text: %s", c.Step, c.Result)
		}
	}
	var list *Answer
	for _, a := range rec.Answers {
		if a.Method == "tools/list" {
			list = a
		}
	}
	if names := gjson.GetBytes(list.Result, "tools.#.name").String(); names != `["zeta","echo"]` {
		t.Errorf("tools = %s", names)
	}
	if !rec.Calls[2].Redacted || rec.Calls[0].Redacted {
		t.Errorf("redacted flags: %+v %+v", rec.Calls[0], rec.Calls[2])
	}

	// Instructions that were all Hindsight's go; so do several servers
	// without a name.
	s := st(0, "initialize", "", "", `{"serverInfo":{"name":"x"},"instructions":"[Hindsight] Before a tool…"}`)
	rec, err = New([]hindsight.Step{s}, "")
	if err != nil || gjson.GetBytes(rec.Initialize, "instructions").Exists() {
		t.Errorf("initialize = %s, %v", rec.Initialize, err)
	}
	other := s
	other.Server = "other"
	if _, err := New([]hindsight.Step{s, other}, ""); err == nil || !strings.Contains(err.Error(), "demo, other") {
		t.Errorf("several servers: err = %v", err)
	}
}

func TestMatch(t *testing.T) {
	rec, err := New(corpus(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	type call struct{ tool, args, want string }
	tests := []struct {
		name  string
		mode  Match
		calls []call
	}{
		{"exact, repeated in order then the last again", MatchExact, []call{
			{"echo", `{"message":"one"}`, "echo: one"},
			{"echo", `{"message":"one","_meta":{"progressToken":1}}`, "echo: one again"},
			{"echo", `{"message":"one"}`, "echo: one again"},
		}},
		{"redacted value matches any value, numbers by value", MatchExact, []call{
			{"zeta", `{"n":2.0,"token":"s3cret"}`, "zeta ok"},
		}},
		{"unmatched names the closest call", MatchExact, []call{
			{"zeta", `{"n":3,"token":"x"}`, "Closest recorded call: step 4, zeta"},
			{"echo", `{"message":"two"}`, "Closest recorded call: step 2, echo"},
			{"nosuch", `{}`, "no recorded call matches nosuch"},
		}},
		{"tool mode ignores arguments", MatchTool, []call{
			{"echo", `{"message":"anything"}`, "echo: one"},
			{"zeta", `{}`, "zeta ok"},
			{"zeta", `{}`, "not found: 404"},
		}},
		{"sequential follows the recorded order", MatchSequential, []call{
			{"echo", `{"message":"x"}`, "echo: one"},
			{"zeta", `{}`, "no recorded call matches zeta"},
			{"echo", `{}`, "echo: one again"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(rec, tt.mode)
			for i, c := range tt.calls {
				sl := s.dispatch("tools/call", json.RawMessage(`{"name":"`+c.tool+`","arguments":`+c.args+`}`))
				if sl == nil || !strings.Contains(string(sl.result), c.want) {
					t.Errorf("call %d %s %s = %+v, want %q", i, c.tool, c.args, sl, c.want)
				}
			}
		})
	}
}

func FuzzSameArguments(f *testing.F) {
	f.Add(`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1.0}`)
	f.Add(`{"a":"[REDACTED:x]"}`, `{"a":{"deep":true}}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		ra, rb := gjson.Parse(a), gjson.Parse(b)
		if SameArguments(ra, ra) != true && gjson.Valid(a) && !hasRedacted(ra) {
			// A value always matches itself.
			t.Fatalf("%s does not match itself", a)
		}
		_ = SameArguments(ra, rb)
	})
}

func FuzzReadSteps(f *testing.F) {
	f.Add(`{"server":"s","method":"tools/call"}` + "\n")
	f.Add(`{"id":"t","steps":[{"server":"s"}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		steps, err := ReadSteps(strings.NewReader(in))
		if err == nil && len(steps) > 0 {
			_, _ = New(steps, "")
		}
	})
}

// connect runs the stand-in on pipes and connects a go-sdk client.
func connect(t *testing.T, s *Server, version string) *mcp.ClientSession {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.ServeStdio(ctx, sr, sw)
		sw.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		cw.Close()
		<-done
	})
	return cs
}

func TestServerBothEras(t *testing.T) {
	rec, err := New(corpus(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"2025-11-25", ""} {
		name := version
		if name == "" {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cs := connect(t, NewServer(rec, MatchExact), version)
			init := cs.InitializeResult()
			if init.ServerInfo.Name != "demo-server" || init.ServerInfo.Version != "1.2.3" || init.Instructions != "Use echo." {
				t.Errorf("initialize = %+v %+v", init, init.ServerInfo)
			}
			if want := map[string]string{"": "2026-07-28"}[version]; want != "" && init.ProtocolVersion != want {
				t.Errorf("protocol version %s, want %s", init.ProtocolVersion, want)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 2 || tools.Tools[0].Name != "zeta" || tools.Tools[1].Annotations == nil || !tools.Tools[1].Annotations.ReadOnlyHint {
				t.Fatalf("tools/list = %+v, %v", tools, err)
			}
			text := func(name string, args any) (string, bool) {
				t.Helper()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					return "error: " + err.Error(), false
				}
				var b strings.Builder
				for _, c := range res.Content {
					b.WriteString(c.(*mcp.TextContent).Text)
				}
				return b.String(), res.IsError
			}
			for _, tc := range []struct {
				tool    string
				args    any
				want    string
				isError bool
			}{
				{"echo", map[string]any{"message": "one"}, "echo: one", false},
				{"echo", map[string]any{"message": "one"}, "echo: one again", false},
				{"zeta", map[string]any{"n": 2, "token": "live"}, "zeta ok", false},
				{"zeta", map[string]any{"n": 404}, "not found: 404", true},
				{"zeta", map[string]any{"n": 5}, "Closest recorded call: step 5, zeta {\"n\":404}", true},
				{"unknown-tool", map[string]any{}, "no recorded call matches unknown-tool", true},
				{"big", map[string]any{}, "truncated", true},
				{"broken", map[string]any{}, "broken tool", false},
			} {
				got, isErr := text(tc.tool, tc.args)
				if !strings.Contains(got, tc.want) || isErr != tc.isError || strings.Contains(got, "[Hindsight]") {
					t.Errorf("%s %v = %q (isError %v), want %q (isError %v)", tc.tool, tc.args, got, isErr, tc.want, tc.isError)
				}
			}
			r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://a"})
			if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != "A" {
				t.Errorf("resources/read = %+v, %v", r, err)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://never"}); err == nil {
				t.Errorf("resources/read of an unrecorded uri: no error")
			}
			p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "Ada"}})
			if err != nil || len(p.Messages) != 1 || p.Messages[0].Content.(*mcp.TextContent).Text != "Hello Ada" {
				t.Errorf("prompts/get = %+v, %v", p, err)
			}
			res, err := cs.ListResources(ctx, nil)
			if err != nil || len(res.Resources) != 1 {
				t.Errorf("resources/list = %+v, %v", res, err)
			}
		})
	}
}

func TestServerHTTP(t *testing.T) {
	rec, err := New(corpus(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"2025-11-25", ""} {
		// A stand-in answers calls in order across its clients: one each.
		hs := httptest.NewServer(NewServer(rec, MatchExact))
		defer hs.Close()
		ctx := context.Background()
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("%q: connect: %v", version, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "one"}})
		if err != nil || res.Content[0].(*mcp.TextContent).Text != "echo: one" {
			t.Errorf("%q: echo = %+v, %v", version, res, err)
		}
		if cs.InitializeResult().ServerInfo.Name != "demo-server" {
			t.Errorf("%q: server %+v", version, cs.InitializeResult().ServerInfo)
		}
		cs.Close()
	}
}
