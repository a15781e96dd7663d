//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests run the real programs: a `hindsight daemon` holding
// experiences, and the agent's sessions through `hindsight wrap` (stdio)
// or `hindsight serve` (Streamable HTTP) in front of `hindsight
// example-server`, spoken to by the official Go SDK's client.

// env is one Hindsight home with its daemon.
type env struct {
	home   hindsight.Home
	exe    string
	client *daemon.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	skipShort(t)
	exe := testbin.Hindsight(t)
	home, c := daemonHome(t, exe, 30*time.Second)
	return &env{home: home, exe: exe, client: c}
}

// skipShort skips process-starting tests under -short (make test-short);
// `make test` runs them.
func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the hindsight binary; skipped under -short")
	}
}

// seed imports experiences into the daemon's store.
func (e *env) seed(t *testing.T, list ...hindsight.Experience) {
	t.Helper()
	var b bytes.Buffer
	now := time.Now().UTC()
	for i := range list {
		x := list[i]
		if x.ID == "" {
			x.ID = fmt.Sprintf("seed-%d-%d", now.UnixNano(), i)
		}
		if x.Server == "" {
			x.Server = "example"
		}
		if x.Confidence == 0 {
			x.Confidence = 0.8
		}
		x.SourceTask, x.SourceSteps, x.EvidenceCount = "seed", []int{0}, 1
		x.CreatedAt, x.UpdatedAt = now, now
		line, _ := json.Marshal(x)
		b.Write(append(line, '\n'))
	}
	// The seeds are the operator's own: trusted, so their confidence
	// stands (an untrusted pack is capped below the injection gate).
	res, err := e.client.ImportWith(context.Background(), &b, daemon.ImportOptions{Trust: true})
	if err != nil || res.Imported != len(list) {
		t.Fatalf("import: %+v, %v", res, err)
	}
}

// config writes a configuration file and returns the global options that
// select it.
func (e *env) config(t *testing.T, yaml string) []string {
	if yaml == "" {
		return nil
	}
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--config", p}
}

// stdio starts `hindsight wrap` over stdio and returns a client session.
func (e *env) stdio(t *testing.T, global []string) *mcp.ClientSession {
	t.Helper()
	args := append(append([]string{}, global...), "wrap", "--name", "example", "--", e.exe, "example-server")
	cmd := exec.Command(e.exe, args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(e.home), "HINDSIGHT_TASK_ID=e2e-"+t.Name())
	cmd.Stderr = os.Stderr
	return e.connect(t, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second})
}

// http starts `hindsight serve` in front of the example server and returns
// a Streamable HTTP client session to it.
func (e *env) http(t *testing.T, global []string) *mcp.ClientSession {
	t.Helper()
	args := append(append([]string{}, global...), "serve", "--listen", "127.0.0.1:0", "--name", "example", "--", e.exe, "example-server")
	cmd := exec.Command(e.exe, args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(e.home))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	url := servedURL(stderr)
	select {
	case u, ok := <-url:
		if !ok {
			t.Fatal("hindsight serve exited before serving")
		}
		return e.connect(t, &mcp.StreamableClientTransport{Endpoint: u})
	case <-time.After(20 * time.Second):
		t.Fatal("hindsight serve did not start")
	}
	return nil
}

func (e *env) connect(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns the server's text and Hindsight's.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	var server string
	var hs []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			if strings.HasPrefix(tc.Text, inject.Marker) {
				hs = append(hs, tc.Text)
			} else {
				server += tc.Text
			}
		}
	}
	return res, server, hs
}

// ask calls query_hindsight and returns its answer.
func ask(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, server, hs := call(t, cs, "query_hindsight", args)
	if server != "" || len(hs) != 1 {
		t.Errorf("query_hindsight answered %q and %q, want one text of Hindsight's", server, hs)
		return res, ""
	}
	return res, hs[0]
}

// injected returns what Hindsight appended to the session's instructions.
func injected(cs *mcp.ClientSession) string {
	instr := cs.InitializeResult().Instructions
	if i := strings.Index(instr, inject.Marker); i >= 0 {
		return instr[i:]
	}
	return ""
}

var demoLessons = []hindsight.Experience{
	{Tool: "fetch_report", ErrorCode: "401", Situation: "fetch_report failed with 401: Unauthorized: no active session.",
		Lesson: "Call login before fetch_report (otherwise it failed with 401)."},
	{Tool: "create_invoice", ErrorCode: "400", Situation: "create_invoice failed with 400: invalid due_date",
		Lesson: `When calling create_invoice, pass due_date in the form NNNN-NN-NN (like "2026-04-15"), not NN/NN/NNNN (like "04/15/2026") (otherwise it failed with 400).`},
	{Tool: "send_invoice", ErrorCode: "429", Situation: "send_invoice failed with 429: Too Many Requests",
		Lesson: "When calling send_invoice, pass pause_ms (e.g. pause_ms=300) (otherwise it failed with 429)."},
	{Server: "other", Tool: "fetch_report", ErrorCode: "401", Lesson: "A lesson of another server, never shown here."},
}

// checkLessons asserts the three channels carry the seeded lessons.
func checkLessons(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	instr := injected(cs)
	for _, want := range []string{"Lessons learned in past runs", "fetch_report: Call login before fetch_report", "create_invoice: When calling create_invoice", "query_hindsight"} {
		if !strings.Contains(instr, want) {
			t.Errorf("instructions lack %q:\n%s", want, cs.InitializeResult().Instructions)
		}
	}
	if !strings.HasPrefix(cs.InitializeResult().Instructions, "Billing API of Example Corp.") {
		t.Errorf("the server's own instructions are not kept first: %q", cs.InitializeResult().Instructions)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "create_invoice,fetch_report,login,send_invoice,query_hindsight,trigger_hindsight" {
		t.Errorf("tools %v", names)
	}
	_, answer := ask(t, cs, map[string]any{"situation": "About to fetch the March report", "tool_name": "fetch_report"})
	if !strings.HasPrefix(answer, inject.Marker+" Past experience") || !strings.Contains(answer, "Lesson: Call login before fetch_report") {
		t.Errorf("query_hindsight answer:\n%s", answer)
	}
	if strings.Contains(answer, "another server") {
		t.Errorf("another server's lesson shown:\n%s", answer)
	}
	res, text, hs := call(t, cs, "fetch_report", map[string]any{"month": "2026-03"})
	if !res.IsError || !strings.HasPrefix(text, "401 Unauthorized") {
		t.Fatalf("fetch_report without login: isError %v %q", res.IsError, text)
	}
	if len(hs) != 1 || !strings.Contains(hs[0], "- Call login before fetch_report") || strings.Count(hs[0], "\n- ") > 2 {
		t.Errorf("lessons on the 401 result: %q", hs)
	}
	if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"error":"unauthorized","status":401}` {
		t.Errorf("structuredContent changed: %s", sc)
	}
	// A successful result is the server's alone.
	if res, _, hs := call(t, cs, "login", map[string]any{"user": "demo", "password": "pw"}); res.IsError || len(hs) != 0 {
		t.Errorf("login: isError %v, Hindsight added %q", res.IsError, hs)
	}
}

func TestEndToEndStdio(t *testing.T) {
	e := newEnv(t)
	e.seed(t, demoLessons...)
	cs := e.stdio(t, nil)
	checkLessons(t, cs)
	cs.Close()

	// What was injected is recorded on the steps that carried it.
	task := e.finalTask(t, "e2e-"+t.Name())
	got := map[string]string{}
	for _, s := range task.Steps {
		for _, inj := range s.Injected {
			if inj.Tokens <= 0 || len(inj.ExperienceIDs) == 0 {
				t.Errorf("step %d (%s %s): injection %+v", s.StepIndex, s.Method, s.Tool, inj)
			}
			got[inj.Channel] = s.Method + " " + s.Tool
		}
	}
	want := map[string]string{
		inject.ChannelInstructions: "server/discover ",
		inject.ChannelQuery:        "tools/call query_hindsight",
		inject.ChannelErrorResult:  "tools/call fetch_report",
	}
	for ch, where := range want {
		if got[ch] != where && !(ch == inject.ChannelInstructions && got[ch] == "initialize ") {
			t.Errorf("%s injection recorded on %q, want %q", ch, got[ch], where)
		}
	}
}

// finalTask waits until the daemon holds task id as final.
func (e *env) finalTask(t *testing.T, id string) *hindsight.Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		task, err := e.client.Task(context.Background(), id)
		if err == nil && task.Final {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not final: %+v, %v", id, task, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestEndToEndStreamableHTTP(t *testing.T) {
	e := newEnv(t)
	e.seed(t, demoLessons...)
	checkLessons(t, e.http(t, nil))
}

func TestEndToEndNoExperience(t *testing.T) {
	e := newEnv(t)
	cs := e.stdio(t, nil)
	if instr := injected(cs); strings.Contains(instr, "Lessons") || !strings.Contains(instr, "query_hindsight") {
		t.Errorf("instructions with an empty store: %q", instr)
	}
	if _, answer := ask(t, cs, map[string]any{"situation": "anything"}); answer != inject.NoExperienceText {
		t.Errorf("answer %q", answer)
	}
	if _, _, hs := call(t, cs, "fetch_report", map[string]any{"month": "2026-03"}); len(hs) != 0 {
		t.Errorf("lessons on an error with an empty store: %q", hs)
	}
}

func TestEndToEndChannelsOff(t *testing.T) {
	e := newEnv(t)
	e.seed(t, demoLessons...)
	tests := []struct {
		name, yaml            string
		instr, tool, errItems bool
	}{
		{"instructions off", "inject:\n  instructions: false\n", false, true, true},
		{"query tool off", "inject:\n  query_tool: false\n", true, false, true},
		{"error results off", "inject:\n  error_results: false\n", true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := e.stdio(t, e.config(t, tt.yaml))
			if got := injected(cs) != ""; got != tt.instr {
				t.Errorf("instructions injected = %v: %q", got, cs.InitializeResult().Instructions)
			}
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			listed := false
			for _, tool := range tools.Tools {
				listed = listed || tool.Name == "query_hindsight"
			}
			if listed != tt.tool {
				t.Errorf("query_hindsight listed = %v", listed)
			}
			if tt.instr && strings.Contains(injected(cs), "query_hindsight") != tt.tool {
				t.Errorf("instructions point to query_hindsight with the tool off:\n%s", injected(cs))
			}
			_, _, hs := call(t, cs, "fetch_report", map[string]any{"month": "2026-03"})
			if got := len(hs) > 0; got != tt.errItems {
				t.Errorf("lessons on the error result = %v: %q", got, hs)
			}
		})
	}
}

func TestEndToEndCaps(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("Check the customer's billing profile, currency and tax region before the call, and log in first. ", 30)
	var many []hindsight.Experience
	for i := range 12 {
		tool := []string{"fetch_report", "create_invoice", "send_invoice"}[i%3]
		many = append(many, hindsight.Experience{Tool: tool, ErrorCode: "401",
			Lesson: fmt.Sprintf("Lesson %d about %s: %s", i, tool, long)})
	}
	e.seed(t, many...)
	cs := e.stdio(t, nil)
	total := inject.CountTokens(injected(cs))
	if total == 0 {
		t.Fatal("no lessons in the instructions")
	}
	for range 4 {
		_, answer := ask(t, cs, map[string]any{"situation": "log in and fetch the report", "tool_name": "fetch_report"})
		if answer == inject.BudgetSpentText {
			break
		}
		_, body, _ := strings.Cut(answer, "\n\n")
		blocks := strings.Split(body, "\n\n")
		if len(blocks) > inject.DefaultMaxExperiences {
			t.Errorf("%d experiences in one answer", len(blocks))
		}
		for _, b := range blocks {
			if n := inject.CountTokens(b); n > inject.DefaultMaxTokensPerLesson {
				t.Errorf("an experience of %d tokens", n)
			}
		}
		total += inject.CountTokens(answer)
		_, _, hs := call(t, cs, "fetch_report", map[string]any{"month": "2026-03"})
		for _, h := range hs {
			if n := strings.Count(h, "\n- "); n > inject.DefaultMaxErrorLessons {
				t.Errorf("%d lessons on one error", n)
			}
			total += inject.CountTokens(h)
		}
	}
	if total > inject.DefaultSessionBudget {
		t.Errorf("%d tokens injected in one session, budget %d", total, inject.DefaultSessionBudget)
	}
	if _, answer := ask(t, cs, map[string]any{"situation": "again", "tool_name": "fetch_report"}); answer != inject.BudgetSpentText {
		t.Errorf("after the budget: %q", answer)
	}
}

// TestEndToEndDaemonDown: with no daemon, the agent's session works and
// query_hindsight says Hindsight is unavailable instead of failing.
func TestEndToEndDaemonDown(t *testing.T) {
	skipShort(t)
	exe := testbin.Hindsight(t)
	// Cleanups run last first: the sidecar stops (e.connect), then any
	// daemon it managed to start, then the home goes. (A home removed
	// under a running sidecar is recreated by it, with a daemon.)
	dir := testbin.Home(t)
	// The sidecar would start a daemon: point it at a binary that cannot.
	e := &env{home: hindsight.Home(dir), exe: exe}
	cmd := exec.Command(exe, "wrap", "--name", "example", "--", exe, "example-server")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+dir)
	// Occupy the socket path with a directory, so no daemon can listen.
	if err := os.MkdirAll(filepath.Join(dir, "hindsight.sock", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	cs := e.connect(t, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second})
	start := time.Now()
	res, answer := ask(t, cs, map[string]any{"situation": "about to fetch", "tool_name": "fetch_report"})
	if res.IsError || answer != inject.UnavailableText {
		t.Errorf("answer with the daemon down: isError %v %q", res.IsError, answer)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("query_hindsight took %v with the daemon down", d)
	}
	if res, text, _ := call(t, cs, "login", map[string]any{"user": "u", "password": "p"}); res.IsError || !strings.HasPrefix(text, "Logged in") {
		t.Errorf("relay broken with the daemon down: %q", text)
	}
}

// TestEndToEndBytesOutsideInjection compares, line by line, what the agent
// receives from the server directly and through the sidecar: away from the
// three interception points, the bytes are the same.
func TestEndToEndBytesOutsideInjection(t *testing.T) {
	e := newEnv(t)
	e.seed(t, demoLessons...)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"login","arguments":{"user":"demo","password":"pw"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fetch_report","arguments":{"month":"2026-03"},"_meta":{"progressToken":7}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"create_invoice","arguments":{"customer":"A","amount":1,"due_date":"2026-04-15"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`,
	}
	direct := rawSession(t, exec.Command(e.exe, "example-server"), nil, lines)
	wrapped := rawSession(t, exec.Command(e.exe, "wrap", "--name", "example", "--", e.exe, "example-server"),
		[]string{"HINDSIGHT_HOME=" + string(e.home)}, lines)
	if len(direct) != len(wrapped) {
		t.Fatalf("%d answers direct, %d wrapped", len(direct), len(wrapped))
	}
	for i := range direct {
		switch i {
		case 0: // initialize: only instructions grow
			if !bytes.Contains(wrapped[i], []byte(inject.Marker)) {
				t.Errorf("initialize not injected: %s", wrapped[i])
			}
		case len(direct) - 1: // tools/list: one tool appended
			cut := bytes.LastIndex(direct[i], []byte("]"))
			if !bytes.HasPrefix(wrapped[i], direct[i][:cut]) || !bytes.HasSuffix(wrapped[i], direct[i][cut:]) || !bytes.Contains(wrapped[i], []byte(`"name":"query_hindsight"`)) {
				t.Errorf("tools/list:\ndirect  %s\nwrapped %s", direct[i], wrapped[i])
			}
		default:
			if !bytes.Equal(direct[i], wrapped[i]) {
				t.Errorf("answer %d differs:\ndirect  %s\nwrapped %s", i, direct[i], wrapped[i])
			}
		}
	}
}

// rawSession writes lines to cmd's stdin one at a time and returns the
// answer to each request.
func rawSession(t *testing.T, cmd *exec.Cmd, env []string, lines []string) [][]byte {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	in, out := testkit.StartPiped(t, cmd)
	defer func() {
		in.Close()
		cmd.Wait()
	}()
	r := bufio.NewReader(out)
	var answers [][]byte
	for _, l := range lines {
		if _, err := io.WriteString(in, l+"\n"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(l, `"id"`) {
			continue
		}
		for {
			b, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("read answer to %s: %v", l, err)
			}
			if bytes.Contains(b, []byte(`"method"`)) {
				continue // a notification from the server
			}
			answers = append(answers, bytes.TrimRight(b, "\n"))
			break
		}
	}
	return answers
}

// TestEndToEndLearnedInSecondSession: a first session stumbles on the 401
// and recovers; once its task is final and reflected on, the second
// session finds the lesson in its instructions, in query_hindsight's
// answer and on the same error.
func TestEndToEndLearnedInSecondSession(t *testing.T) {
	e := newEnv(t)
	first := e.stdioTask(t, "e2e-learn-1")
	if res, _, _ := call(t, first, "fetch_report", map[string]any{"month": "2026-03"}); !res.IsError {
		t.Fatal("fetch_report without login succeeded")
	}
	call(t, first, "login", map[string]any{"user": "demo", "password": "secret-pw-1"})
	if res, _, _ := call(t, first, "fetch_report", map[string]any{"month": "2026-03"}); res.IsError {
		t.Fatal("fetch_report after login failed")
	}
	first.Close()
	e.finalTask(t, "e2e-learn-1")
	if err := e.client.Reflect(context.Background(), []string{"e2e-learn-1"}, false, nil); err != nil {
		t.Fatalf("reflect: %v", err)
	}

	second := e.stdioTask(t, "e2e-learn-2")
	if instr := injected(second); !strings.Contains(instr, "fetch_report: Call login before fetch_report") {
		t.Errorf("second session's instructions: %q", instr)
	}
	if _, answer := ask(t, second, map[string]any{"situation": "fetch the March report", "tool_name": "fetch_report"}); !strings.Contains(answer, "Lesson: Call login before fetch_report") {
		t.Errorf("query_hindsight answer: %q", answer)
	}
	res, _, hs := call(t, second, "fetch_report", map[string]any{"month": "2026-03"})
	if !res.IsError || len(hs) != 1 || !strings.Contains(hs[0], "- Call login before fetch_report") {
		t.Errorf("the same error in the second session: isError %v, lessons %q", res.IsError, hs)
	}
}

// stdioTask is stdio with an explicit task id.
func (e *env) stdioTask(t *testing.T, task string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(e.exe, "wrap", "--name", "example", "--", e.exe, "example-server")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(e.home), "HINDSIGHT_TASK_ID="+task)
	cmd.Stderr = os.Stderr
	return e.connect(t, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second})
}
