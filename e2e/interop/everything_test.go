package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// step is one observation of a conversation, as normalized JSON.
type step struct {
	name string
	json string
}

// transcript records what a client saw, in order.
type transcript struct {
	mu    sync.Mutex
	steps []step
}

func (tr *transcript) add(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.steps = append(tr.steps, step{name, string(b)})
}

// compare fails t for every step that differs between direct and proxied.
func compare(t *testing.T, direct, proxied *transcript) {
	t.Helper()
	if len(direct.steps) != len(proxied.steps) {
		t.Errorf("direct saw %d steps, through the sidecar %d", len(direct.steps), len(proxied.steps))
	}
	for i := 0; i < len(direct.steps) && i < len(proxied.steps); i++ {
		d, p := direct.steps[i], proxied.steps[i]
		if d.name != p.name || d.json != p.json {
			t.Errorf("step %d differs:\n direct  %s: %s\n sidecar %s: %s", i, d.name, cut(d.json), p.name, cut(p.json))
		}
	}
}

func cut(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// wrapped returns the command that runs argv behind `hindsight wrap`, with
// a fresh HINDSIGHT_HOME whose configuration switches injection off: these
// tests compare the relay with a direct connection, and injection changes
// instructions, tools/list and isError results on purpose. Capture stays
// on. The sidecar's log is printed if the test fails, and the daemon the
// sidecar starts in that home is stopped at the end.
func wrapped(t *testing.T, name string, argv ...string) *exec.Cmd {
	t.Helper()
	return wrappedWith(t, true, name, argv...)
}

// wrappedWith is wrapped with injection switched off (noInject) or left at
// its defaults.
func wrappedWith(t *testing.T, noInject bool, name string, argv ...string) *exec.Cmd {
	t.Helper()
	if testing.Short() {
		t.Skip("builds hindsight and starts servers; not in -short mode")
	}
	home := t.TempDir()
	if noInject {
		cfg := "inject:\n  instructions: false\n  error_results: false\n  query_tool: false\n"
		must(t, "write config", os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600))
	}
	cmd := exec.Command(testbin.Hindsight(t), append([]string{"wrap", "--name", name, "--grace", "2s", "--"}, argv...)...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home)
	// The daemon the sidecar starts stops before home is removed.
	testbin.StopDaemon(t, home)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("INTEROP_LOG") != "" {
			b, _ := os.ReadFile(filepath.Join(home, "logs", "wrap-"+name+".log"))
			t.Logf("sidecar log:\n%s", cut(string(b)))
		}
	})
	return cmd
}

// everythingClient is a go-sdk client with sampling, elicitation and roots,
// recording what the server asked of it.
func everythingClient(tr *transcript, t *testing.T, progress chan<- *mcp.ProgressNotificationParams) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: "interop", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			tr.add(t, "sampling request", req.Params)
			return &mcp.CreateMessageResult{
				Role:       "assistant",
				Model:      "interop-model",
				StopReason: "endTurn",
				Content:    &mcp.TextContent{Text: "sampled: the answer is 42"},
			}, nil
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			tr.add(t, "elicitation request", req.Params)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{
				"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7,
			}}, nil
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///srv/interop-root", Name: "interop root"})
	return c
}

// everythingConversation runs the same conversation against the server
// behind transport and returns what the client saw.
func everythingConversation(t *testing.T, transport mcp.Transport, version string) *transcript {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := &transcript{}
	progress := make(chan *mcp.ProgressNotificationParams, 100)
	client := everythingClient(tr, t, progress)
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	init := cs.InitializeResult()
	tr.add(t, "initialize", init)

	// The server registers its client-dependent tools after initialization.
	var tools *mcp.ListToolsResult
	for deadline := time.Now().Add(20 * time.Second); ; {
		tools, err = cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if testkit.HasTool(tools, "trigger-sampling-request") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	tr.add(t, "tools/list", tools)
	for _, want := range []string{"echo", "get-tiny-image", "get-structured-content", "trigger-long-running-operation",
		"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} {
		if !testkit.HasTool(tools, want) {
			t.Errorf("tools/list lacks %s", want)
		}
	}

	addPrompts(ctx, t, cs, tr)

	resources, err := cs.ListResources(ctx, nil)
	must(t, "resources/list", err)
	tr.add(t, "resources/list", resources)
	templates, err := cs.ListResourceTemplates(ctx, nil)
	must(t, "resources/templates/list", err)
	tr.add(t, "resources/templates/list", templates)
	if len(templates.ResourceTemplates) == 0 {
		t.Errorf("no resource templates")
	}
	if len(resources.Resources) > 0 {
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: resources.Resources[0].URI})
		must(t, "resources/read", err)
		tr.add(t, "resources/read", r)
	}
	// A resource from a template; its text carries the time it was made.
	r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/dynamic/blob/3"})
	must(t, "resources/read template", err)
	if len(r.Contents) != 1 || !strings.HasPrefix(string(r.Contents[0].Blob), "Resource 3:") {
		t.Errorf("resources/read template: %+v", r.Contents)
	} else {
		tr.add(t, "resources/read template", []string{r.Contents[0].URI, r.Contents[0].MIMEType})
	}

	comp, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "completable-prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "department", Value: "E"},
	})
	must(t, "completion/complete", err)
	tr.add(t, "completion/complete", comp)
	if len(comp.Completion.Values) == 0 {
		t.Errorf("no completions")
	}

	call := func(name string, args any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			tr.add(t, "tools/call "+name+" error", err.Error())
			return nil
		}
		tr.add(t, "tools/call "+name, res)
		return res
	}
	call("echo", map[string]any{"message": "héllo ✓"})
	call("get-sum", map[string]any{"a": 2, "b": 40.5})
	if res := call("get-tiny-image", map[string]any{}); res == nil || !hasImage(res) {
		t.Errorf("get-tiny-image: no image content")
	}
	if res := call("get-structured-content", map[string]any{"location": "Chicago"}); res == nil || res.StructuredContent == nil {
		t.Errorf("get-structured-content: no structured content")
	}
	call("get-annotated-message", map[string]any{"messageType": "error", "includeImage": true})
	if res := call("get-sum", map[string]any{"a": "not a number"}); res == nil || !res.IsError {
		t.Errorf("get-sum with a bad argument: want an isError result")
	}

	// A long operation with progress notifications.
	params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 0.4, "steps": 4}}
	params.SetProgressToken("long-op")
	res, err := cs.CallTool(ctx, params)
	must(t, "long operation", err)
	tr.add(t, "tools/call long operation", res)
	// The client may handle the last notification after the result.
	got := progressOf(progress, 4)
	tr.add(t, "progress notifications", got)
	if len(got) != 4 {
		t.Errorf("progress notifications: %q, want 4", got)
	}

	// Cancellation: give up after the first progress notification.
	cctx, ccancel := context.WithCancel(ctx)
	params = &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 60, "steps": 600}}
	params.SetProgressToken("to-cancel")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, params)
		errc <- err
	}()
	for first := false; !first; {
		select {
		case n := <-progress:
			first = n.ProgressToken == "to-cancel"
		case <-time.After(30 * time.Second):
			t.Fatal("no progress from the operation to cancel")
		}
	}
	ccancel()
	err = <-errc
	tr.add(t, "cancelled call", errors.Is(err, context.Canceled))
	must(t, "ping after cancel", cs.Ping(ctx, nil))

	// Server → client requests: sampling, elicitation, roots.
	call("trigger-sampling-request", map[string]any{"prompt": "What is the answer?", "maxTokens": 20})
	call("trigger-elicitation-request", map[string]any{})
	if res := call("get-roots-list", map[string]any{}); res == nil || !strings.Contains(textOf(res), "file:///srv/interop-root") {
		t.Errorf("get-roots-list did not see the client's root: %s", textOf(res))
	}
	return tr
}

// addPrompts lists the server's prompts and gets args-prompt, adding both
// answers to tr.
func addPrompts(ctx context.Context, t *testing.T, cs *mcp.ClientSession, tr *transcript) {
	t.Helper()
	prompts, err := cs.ListPrompts(ctx, nil)
	must(t, "prompts/list", err)
	tr.add(t, "prompts/list", prompts)
	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt", Arguments: map[string]string{"city": "Paris", "state": "Île-de-France"}})
	must(t, "prompts/get", err)
	tr.add(t, "prompts/get", p)
}

// progressOf returns up to n progress notifications from progress, as
// "token progress/total", giving up when none comes for 5 s.
func progressOf(progress <-chan *mcp.ProgressNotificationParams, n int) []string {
	var got []string
	for len(got) < n {
		select {
		case p := <-progress:
			got = append(got, fmt.Sprintf("%v %v/%v", p.ProgressToken, p.Progress, p.Total))
			continue
		case <-time.After(5 * time.Second):
		}
		break
	}
	return got
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func hasImage(r *mcp.CallToolResult) bool {
	for _, c := range r.Content {
		if img, ok := c.(*mcp.ImageContent); ok && len(img.Data) > 0 {
			return true
		}
	}
	return false
}

func textOf(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestEverythingThroughWrap runs one conversation with the everything
// server directly and through `hindsight wrap`, in both protocol eras the
// client speaks, and compares what the client saw.
func TestEverythingThroughWrap(t *testing.T) {
	skipShort(t)
	everything := testbin.NPM(t, "mcp-server-everything")
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "latest"
		}
		t.Run(name, func(t *testing.T) {
			direct := everythingConversation(t, &mcp.CommandTransport{Command: exec.Command(everything, "stdio")}, version)
			proxied := everythingConversation(t, &mcp.CommandTransport{Command: wrapped(t, "everything", everything, "stdio")}, version)
			compare(t, direct, proxied)
		})
	}
}

// TestEverythingThroughFullSidecar runs the conversation through a sidecar
// with capture and injection at their defaults: the conversation must
// still work, and differ from the direct one only where injection means
// to change it (the instructions and the query_hindsight tool).
func TestEverythingThroughFullSidecar(t *testing.T) {
	skipShort(t)
	everything := testbin.NPM(t, "mcp-server-everything")
	direct := everythingConversation(t, &mcp.CommandTransport{Command: exec.Command(everything, "stdio")}, "2025-11-25")
	proxied := everythingConversation(t, &mcp.CommandTransport{Command: wrappedWith(t, false, "everything", everything, "stdio")}, "2025-11-25")
	if len(proxied.steps) < 2 || len(direct.steps) < 2 {
		t.Fatalf("conversation too short")
	}
	// initialize: the server's instructions, with Hindsight's after them.
	var di, pi map[string]any
	json.Unmarshal([]byte(direct.steps[0].json), &di)
	json.Unmarshal([]byte(proxied.steps[0].json), &pi)
	dInstr, _ := di["instructions"].(string)
	pInstr, _ := pi["instructions"].(string)
	if !strings.HasPrefix(pInstr, dInstr) || !strings.Contains(pInstr[len(dInstr):], "Hindsight") {
		t.Errorf("instructions through the sidecar do not extend the server's: %q", cut(pInstr[min(len(pInstr), len(dInstr)):]))
	}
	delete(di, "instructions")
	delete(pi, "instructions")
	// tools/list: the server's tools, query_hindsight and trigger_hindsight.
	var dt, pt struct {
		Tools []json.RawMessage `json:"tools"`
	}
	json.Unmarshal([]byte(direct.steps[1].json), &dt)
	json.Unmarshal([]byte(proxied.steps[1].json), &pt)
	var rest []json.RawMessage
	found := map[string]bool{}
	for _, tool := range pt.Tools {
		if name := gjson.GetBytes(tool, "name").Str; name == "query_hindsight" || name == "trigger_hindsight" {
			found[name] = true
			continue
		}
		rest = append(rest, tool)
	}
	if !found["query_hindsight"] || !found["trigger_hindsight"] {
		t.Errorf("tools/list through the sidecar lacks query_hindsight or trigger_hindsight: %v", found)
	}
	proxied.steps[0].json, direct.steps[0].json = mustJSON(t, pi), mustJSON(t, di)
	proxied.steps[1].json, direct.steps[1].json = mustJSON(t, rest), mustJSON(t, dt.Tools)
	compare(t, direct, proxied)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, "marshal", err)
	return string(b)
}

// skipShort skips tests that start real servers under `go test -short`
// (make test-short); `make test`, which CI runs, runs them all.
func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real MCP servers; not in -short mode")
	}
}
