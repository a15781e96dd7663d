package interop

// `hindsight mcp`, the memory as an MCP server, driven by the official Go
// SDK's client and by a raw JSON-RPC client, against a real daemon; with
// a real `hindsight wrap` sidecar in the same task.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// memHome is a fresh home with a running daemon, stopped at the end.
func memHome(t *testing.T) (hindsight.Home, *daemon.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the hindsight binary; skipped under -short")
	}
	exe := testbin.Hindsight(t)
	home := hindsight.Home(testbin.Home(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := daemon.EnsureRunning(ctx, home, exe)
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"mcp.log", "daemon.log", "wrap-billing.log"} {
				b, _ := os.ReadFile(home.Path("logs", name))
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("%s:\n%s", name, b)
			}
		}
	})
	return home, c
}

// memSession connects the Go SDK's client to `hindsight mcp` on stdio.
func memSession(t *testing.T, home hindsight.Home) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), "mcp")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "interop-memory", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	must(t, "connect to hindsight mcp", err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// memTools lists the server's tools, with each output schema resolved.
func memTools(t *testing.T, cs *mcp.ClientSession) (map[string]*mcp.Tool, map[string]*jsonschema.Resolved) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	must(t, "tools/list", err)
	tools := map[string]*mcp.Tool{}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
		b, err := json.Marshal(tool.OutputSchema)
		must(t, "encode output schema", err)
		var s jsonschema.Schema
		must(t, "decode output schema of "+tool.Name, json.Unmarshal(b, &s))
		r, err := s.Resolve(nil)
		must(t, "resolve output schema of "+tool.Name, err)
		schemas[tool.Name] = r
	}
	return tools, schemas
}

// memCall calls a tool, requires success, and checks its structured
// content against the tool's output schema and its text against the
// structured content.
func memCall(t *testing.T, cs *mcp.ClientSession, schemas map[string]*jsonschema.Resolved, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	must(t, name, err)
	if res.IsError {
		t.Fatalf("%s: isError: %s", name, resultText(res))
	}
	if res.StructuredContent == nil || len(res.Content) == 0 {
		t.Fatalf("%s: want structuredContent and text, got %+v", name, res)
	}
	b, err := json.Marshal(res.StructuredContent)
	must(t, "encode structured content", err)
	var inst any
	must(t, "decode structured content", json.Unmarshal(b, &inst))
	if err := schemas[name].Validate(inst); err != nil {
		t.Fatalf("%s: structured content %s does not fit the output schema: %v", name, b, err)
	}
	if out != nil {
		must(t, "decode "+name, json.Unmarshal(b, out))
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMemoryServerTools: every tool is listed with its schemas and
// truthful annotations, answers within its output schema, and refuses bad
// input with an isError result.
func TestMemoryServerTools(t *testing.T) {
	home, _ := memHome(t)
	cs := memSession(t, home)
	if got := cs.InitializeResult().Instructions; !strings.Contains(got, "store_episode") {
		t.Errorf("instructions = %q", got)
	}
	tools, schemas := memTools(t, cs)
	want := map[string][3]bool{ // readOnly, destructive, idempotent
		"store_episode":     {false, false, false},
		"query_episodes":    {true, false, true},
		"trigger_hindsight": {false, false, true},
		"query_hindsight":   {true, false, true},
		"query_semantic":    {true, false, true},
		"list_tasks":        {true, false, true},
	}
	for name, h := range want {
		tool := tools[name]
		if tool == nil {
			t.Fatalf("tool %s missing from %v", name, slices.Collect(mapsKeys(tools)))
		}
		a := tool.Annotations
		if tool.InputSchema == nil || tool.OutputSchema == nil || a == nil {
			t.Fatalf("%s: schemas or annotations missing", name)
		}
		if a.ReadOnlyHint != h[0] || a.DestructiveHint == nil || *a.DestructiveHint != h[1] || a.IdempotentHint != h[2] {
			t.Errorf("%s: annotations %+v, want readOnly %v destructive %v idempotent %v", name, a, h[0], h[1], h[2])
		}
	}
	if len(tools) != len(want) {
		t.Errorf("%d tools, want %d", len(tools), len(want))
	}

	var stored struct {
		TaskID    string `json:"task_id"`
		StepIndex int    `json:"step_index"`
		Duplicate bool   `json:"duplicate"`
	}
	memCall(t, cs, schemas, "store_episode", map[string]any{"task_id": "tools-1", "action": "shell",
		"input": map[string]any{"cmd": "ls"}, "observation": "a.go b.go", "timestamp": "2026-12-01T10:00:00Z"}, &stored)
	if stored.TaskID != "tools-1" || stored.StepIndex != 0 || stored.Duplicate {
		t.Fatalf("store_episode = %+v", stored)
	}
	memCall(t, cs, schemas, "store_episode", map[string]any{"task_id": "tools-1", "step_index": 0, "action": "shell",
		"input": map[string]any{"cmd": "ls"}, "observation": "a.go b.go", "timestamp": "2026-12-01T10:00:00Z"}, &stored)
	if !stored.Duplicate {
		t.Fatalf("store_episode again = %+v, want duplicate", stored)
	}
	var page struct {
		Total int `json:"total"`
		Steps []struct {
			Kind        string `json:"kind"`
			Tool        string `json:"tool"`
			Observation string `json:"observation"`
		} `json:"steps"`
	}
	memCall(t, cs, schemas, "query_episodes", map[string]any{"task_id": "tools-1"}, &page)
	if page.Total != 1 || page.Steps[0].Kind != "episode" || page.Steps[0].Tool != "shell" || page.Steps[0].Observation != "a.go b.go" {
		t.Fatalf("query_episodes = %+v", page)
	}
	var list struct {
		Tasks []struct{ ID, Status string } `json:"tasks"`
	}
	memCall(t, cs, schemas, "list_tasks", map[string]any{"status": "open"}, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].ID != "tools-1" {
		t.Fatalf("list_tasks open = %+v", list)
	}
	var q struct {
		Text        string `json:"text"`
		Experiences []any  `json:"experiences"`
	}
	res := memCall(t, cs, schemas, "query_hindsight", map[string]any{"situation": "listing files"}, &q)
	if q.Text != "[Hindsight] No relevant past experience; decide from the current context." || resultText(res) != q.Text {
		t.Fatalf("query_hindsight = %+v / %q", q, resultText(res))
	}
	memCall(t, cs, schemas, "query_semantic", map[string]any{"query_text": "listing files", "top_k": 2}, &q)
	var trig struct {
		TaskID     string `json:"task_id"`
		Reflection string `json:"reflection"`
		Queued     bool   `json:"queued"`
	}
	memCall(t, cs, schemas, "trigger_hindsight", map[string]any{"task_id": "tools-1"}, &trig)
	if trig.TaskID != "tools-1" || !trig.Queued {
		t.Fatalf("trigger_hindsight = %+v", trig)
	}
	memCall(t, cs, schemas, "list_tasks", map[string]any{"status": "open"}, &list)
	if len(list.Tasks) != 0 {
		t.Fatalf("list_tasks open after trigger = %+v", list)
	}

	// Bad input: an isError result that says what is wrong.
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"store_episode", map[string]any{"task_id": "a/b", "action": "x", "observation": ""}, "task_id"},
		{"store_episode", map[string]any{"task_id": "t", "action": "x", "observation": "", "timestamp": "yesterday"}, "timestamp"},
		{"query_episodes", map[string]any{"task_id": "t-none"}, "not found"},
		{"trigger_hindsight", map[string]any{"task_id": "t-none"}, "not found"},
		{"list_tasks", map[string]any{"status": "sleeping"}, "status"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		must(t, tc.tool, err)
		if !res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("%s %v = %v %q, want an error about %q", tc.tool, tc.args, res.IsError, resultText(res), tc.want)
		}
	}
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestMemoryServerRawJSONRPC: a client speaking newline-delimited JSON-RPC
// by hand gets the handshake, the tool list and a tool's answer.
func TestMemoryServerRawJSONRPC(t *testing.T) {
	home, _ := memHome(t)
	cmd := exec.Command(testbin.Hindsight(t), "mcp")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	stdin, stdout := testkit.StartPiped(t, cmd)
	defer func() { stdin.Close(); cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	send := func(s string) { io.WriteString(stdin, s+"\n") }
	recv := func(id int) map[string]any {
		t.Helper()
		for lines.Scan() {
			var m map[string]any
			must(t, "decode "+lines.Text(), json.Unmarshal(lines.Bytes(), &m))
			if m["id"] == float64(id) {
				return m
			}
		}
		t.Fatalf("no answer to request %d: %v", id, lines.Err())
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	init := recv(1)
	if r, _ := init["result"].(map[string]any); r == nil || r["protocolVersion"] != "2025-06-18" {
		t.Fatalf("initialize = %v", init)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	list := recv(2)
	b, _ := json.Marshal(list)
	for _, name := range []string{"store_episode", "query_episodes", "trigger_hindsight", "query_hindsight", "query_semantic", "list_tasks", "outputSchema", "readOnlyHint"} {
		if !strings.Contains(string(b), `"`+name+`"`) {
			t.Errorf("tools/list lacks %s: %s", name, b)
		}
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"store_episode","arguments":{"task_id":"raw-1","action":"browser.open","observation":"page loaded"}}}`)
	res := recv(3)
	r, _ := res["result"].(map[string]any)
	if sc, _ := r["structuredContent"].(map[string]any); r == nil || r["isError"] == true || sc["task_id"] != "raw-1" {
		t.Fatalf("store_episode = %v", res)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_tasks","arguments":{}}}`)
	res = recv(4)
	b, _ = json.Marshal(res)
	if !strings.Contains(string(b), `"raw-1"`) {
		t.Fatalf("list_tasks = %s", b)
	}
}

// wrapBilling connects the Go SDK's client to the example billing server
// behind `hindsight wrap`, with task set as HINDSIGHT_TASK_ID when not "".
func wrapBilling(t *testing.T, home hindsight.Home, task string) *mcp.ClientSession {
	t.Helper()
	exe := testbin.Hindsight(t)
	cmd := exec.Command(exe, "wrap", "--name", "billing", "--", exe, "example-server")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	if task != "" {
		cmd.Env = append(cmd.Env, "HINDSIGHT_TASK_ID="+task)
	}
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "interop-agent", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	must(t, "connect through wrap", err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestMemoryServerEndToEnd: an agent records three steps outside MCP with
// store_episode, makes two MCP calls through a sidecar in the same task,
// and ends it with trigger_hindsight: the task is reflected at once (no
// idle gap) and the lesson cites both kinds of steps; list_tasks and
// query_episodes show them.
func TestMemoryServerEndToEnd(t *testing.T) {
	home, _ := memHome(t)
	const task = "e2e-billing"
	mem := memSession(t, home)
	_, schemas := memTools(t, mem)
	agent := wrapBilling(t, home, task)
	ctx := context.Background()

	episode := func(action, obs string, failed bool, in map[string]any) {
		t.Helper()
		memCall(t, mem, schemas, "store_episode", map[string]any{"task_id": task, "action": action,
			"input": in, "observation": obs, "failed": failed}, nil)
	}
	mcpCall := func(tool string, args map[string]any) {
		t.Helper()
		res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		must(t, tool, err)
		if res.IsError {
			t.Fatalf("%s: %s", tool, resultText(res))
		}
	}
	var page struct {
		Total int `json:"total"`
		Steps []struct {
			StepIndex int    `json:"step_index"`
			Kind      string `json:"kind"`
			Method    string `json:"method"`
			Tool      string `json:"tool"`
			IsError   bool   `json:"is_error"`
		} `json:"steps"`
	}
	mcpCalls := func() int {
		memCall(t, mem, schemas, "query_episodes", map[string]any{"task_id": task, "limit": 200}, &page)
		n := 0
		for _, s := range page.Steps {
			if s.Kind == "mcp" && s.Method == "tools/call" {
				n++
			}
		}
		return n
	}

	// The agent first tried the report with its own HTTP tool, which the
	// server refused; then logged in through MCP and fetched it there.
	episode("read_ticket", "Ticket 42: send the March report to finance.", false, map[string]any{"ticket": "42"})
	episode("fetch_report", "HTTP 401 Unauthorized: no active session. Call login first.", true, map[string]any{"month": "2026-03"})
	mcpCall("login", map[string]any{"user": "ada", "password": "pw"})
	mcpCall("fetch_report", map[string]any{"month": "2026-03"})
	testkit.WaitFor(t, "the sidecar's steps", 30*time.Second, func() bool {
		_, err := os.Stat(home.Socket())
		return err == nil && page.Total >= 0 && mcpCalls() == 2
	})
	episode("write_summary", "Summary written.", false, nil)

	start := time.Now()
	var trig struct {
		Reflection string `json:"reflection"`
		Waited     bool   `json:"waited"`
		Lessons    []struct {
			Tool        string `json:"tool"`
			Lesson      string `json:"lesson"`
			SourceSteps []int  `json:"source_steps"`
		} `json:"lessons"`
	}
	memCall(t, mem, schemas, "trigger_hindsight", map[string]any{"task_id": task, "wait": true}, &trig)
	if !trig.Waited || trig.Reflection != "done" || time.Since(start) > 30*time.Second {
		t.Fatalf("trigger_hindsight = %+v after %v", trig, time.Since(start))
	}
	mcpCalls()
	kind := map[int]string{}
	for _, s := range page.Steps {
		kind[s.StepIndex] = s.Kind
	}
	cites := false
	for _, l := range trig.Lessons {
		kinds := map[string]bool{}
		for _, i := range l.SourceSteps {
			kinds[kind[i]] = true
		}
		t.Logf("lesson on %s citing %v: %s", l.Tool, l.SourceSteps, l.Lesson)
		if kinds["episode"] && kinds["mcp"] && strings.Contains(l.Lesson, "login") {
			cites = true
		}
	}
	if !cites {
		t.Fatalf("no lesson cites both an episode and an MCP step: %+v (steps %+v)", trig.Lessons, page.Steps)
	}
	episodes := 0
	for _, s := range page.Steps {
		if s.Kind == "episode" {
			episodes++
		}
	}
	if episodes != 3 {
		t.Fatalf("query_episodes shows %d episodes, want 3: %+v", episodes, page.Steps)
	}
	var list struct {
		Tasks []struct {
			ID, Status string
			Servers    []string
		} `json:"tasks"`
	}
	memCall(t, mem, schemas, "list_tasks", map[string]any{"status": "reflected"}, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].ID != task || !slices.Contains(list.Tasks[0].Servers, "agent") || !slices.Contains(list.Tasks[0].Servers, "billing") {
		t.Fatalf("list_tasks reflected = %+v", list)
	}
	// The lesson is there for the next agent.
	var q struct {
		Text string `json:"text"`
	}
	memCall(t, mem, schemas, "query_hindsight", map[string]any{"situation": "fetch_report failed: Unauthorized", "tool_name": "fetch_report"}, &q)
	if !strings.Contains(q.Text, "login") {
		t.Fatalf("query_hindsight after the lesson = %q", q.Text)
	}
}

// TestFinalMetaEndsTask: a request with _meta["io.hindsight/final"]: true
// ends its task, which is reflected without waiting for the idle gap,
// while the agent's session is still open; the instructions say how.
func TestFinalMetaEndsTask(t *testing.T) {
	home, c := memHome(t)
	agent := wrapBilling(t, home, "")
	if got := agent.InitializeResult().Instructions; !strings.Contains(got, `"io.hindsight/final": true`) {
		t.Errorf("instructions lack the end-of-task sentence: %q", got)
	}
	ctx := context.Background()
	res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "fetch_report", Arguments: map[string]any{"month": "2026-03"}})
	must(t, "fetch_report", err)
	if !res.IsError {
		t.Fatal("fetch_report before login succeeded")
	}
	_, err = agent.CallTool(ctx, &mcp.CallToolParams{Name: "login", Arguments: map[string]any{"user": "ada", "password": "pw"}})
	must(t, "login", err)
	p := &mcp.CallToolParams{Name: "fetch_report", Arguments: map[string]any{"month": "2026-03"}}
	p.Meta = mcp.Meta{"io.hindsight/final": true}
	_, err = agent.CallTool(ctx, p)
	must(t, "fetch_report, final", err)

	var task *hindsight.Task
	testkit.WaitFor(t, "the task reflected", 30*time.Second, func() bool {
		tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
		if err != nil || len(tasks) != 1 {
			return false
		}
		task = &tasks[0]
		return task.Final && task.Reflection == "done"
	})
	full, err := c.Task(ctx, task.ID)
	must(t, "task", err)
	calls := 0
	for _, s := range full.Steps {
		if s.Method == "tools/call" {
			calls++
		}
	}
	if calls != 3 {
		t.Fatalf("the ended task has %d tool calls, want 3", calls)
	}
	// The next request of the same agent starts a new task.
	_, err = agent.CallTool(ctx, &mcp.CallToolParams{Name: "fetch_report", Arguments: map[string]any{"month": "2026-04"}})
	must(t, "fetch_report after the end", err)
	testkit.WaitFor(t, "a second task", 30*time.Second, func() bool {
		tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
		return err == nil && len(tasks) == 2
	})
}

// TestMemoryServerHTTP: --listen serves Streamable HTTP with a bearer
// token, and a non-loopback address without one is refused.
func TestMemoryServerHTTP(t *testing.T) {
	home, _ := memHome(t)
	exe := testbin.Hindsight(t)
	out, err := exec.Command(exe, "--home", string(home), "mcp", "--listen", "0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--auth-token") {
		t.Fatalf("non-loopback without a token: %v %s", err, out)
	}
	cmd := exec.Command(exe, "--home", string(home), "mcp", "--listen", "127.0.0.1:0", "--auth-token", "s3cret-token")
	stderr, err := cmd.StderrPipe()
	must(t, "stderr", err)
	must(t, "start", cmd.Start())
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	var url string
	re := regexp.MustCompile(`on (http://[^ ]+/mcp)`)
	for url == "" && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatal("no address announced")
	}
	go io.Copy(io.Discard, stderr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bad := mcp.NewClient(&mcp.Implementation{Name: "no-token", Version: "1"}, nil)
	if cs, err := bad.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil); err == nil {
		cs.Close()
		t.Fatal("connected without the token")
	}
	good := mcp.NewClient(&mcp.Implementation{Name: "token", Version: "1"}, nil)
	cs, err := good.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: bearerClient("s3cret-token")}, nil)
	must(t, "connect with the token", err)
	defer cs.Close()
	_, schemas := memTools(t, cs)
	var list struct {
		Tasks []any `json:"tasks"`
	}
	memCall(t, cs, schemas, "list_tasks", map[string]any{}, &list)
}

// bearerClient is an HTTP client that sends token as a bearer token.
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token}}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSidecarTriggerEndsTask: the sidecar's trigger_hindsight tool, listed
// beside query_hindsight, ends the session's task, which is reflected
// without waiting for the idle gap.
func TestSidecarTriggerEndsTask(t *testing.T) {
	home, c := memHome(t)
	agent := wrapBilling(t, home, "")
	ctx := context.Background()
	tools, err := agent.ListTools(ctx, nil)
	must(t, "tools/list", err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "trigger_hindsight") || !slices.Contains(names, "query_hindsight") {
		t.Fatalf("tools %v", names)
	}
	if got := agent.InitializeResult().Instructions; strings.Count(got, "trigger_hindsight") != 1 {
		t.Errorf("instructions: %q", got)
	}
	_, err = agent.CallTool(ctx, &mcp.CallToolParams{Name: "fetch_report", Arguments: map[string]any{"month": "2026-03"}})
	must(t, "fetch_report", err)
	res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_hindsight", Arguments: map[string]any{}})
	must(t, "trigger_hindsight", err)
	if res.IsError || !strings.Contains(resultText(res), "Task ended") {
		t.Fatalf("trigger_hindsight = %v %q", res.IsError, resultText(res))
	}
	testkit.WaitFor(t, "the task reflected", 30*time.Second, func() bool {
		tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
		return err == nil && len(tasks) == 1 && tasks[0].Final && tasks[0].Reflection == "done"
	})
}
