//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// program is a program started by a test.
type program struct {
	cmd    *exec.Cmd
	stderr io.Reader
	done   chan struct{} // closed when it exited
	home   string        // its HINDSIGHT_HOME, when a test gave it one
}

// startProcess runs a program in its own process group and stops the group
// when the test ends.
func startProcess(t *testing.T, env []string, name string, args ...string) *program {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &program{cmd: cmd, stderr: stderr, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		start := time.Now()
		defer func() { t.Logf("%s stopped in %v", name, time.Since(start).Round(time.Millisecond)) }()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// startEverything runs the reference server in mode ("streamableHttp" or
// "sse") on a free loopback port and returns its base URL.
func startEverything(t *testing.T, mode string) string {
	t.Helper()
	bin := testbin.NPM(t, "mcp-server-everything")
	port := testkit.FreePort(t)
	p := startProcess(t, []string{fmt.Sprintf("PORT=%d", port)}, bin, mode)
	go io.Copy(io.Discard, p.stderr)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return base
		}
		if time.Now().After(deadline) {
			t.Fatalf("everything server (%s) did not listen on %d: %v", mode, port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var listeningRE = regexp.MustCompile(`on http://([^/\s]+)/mcp`)

// relayOnly is a configuration that switches injection off, so that a
// conversation through the sidecar must equal the direct one.
const relayOnly = "inject:\n  instructions: false\n  error_results: false\n  query_tool: false\n"

// startServe runs the real `hindsight serve`, relaying only, and returns
// its base URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	url, _ := startServeProc(t, relayOnly, args...)
	return url
}

// startServeProc runs `hindsight serve` with the configuration cfg ("" for
// the defaults) and returns its base URL and process.
func startServeProc(t *testing.T, cfg string, args ...string) (string, *program) {
	t.Helper()
	bin := testbin.Hindsight(t)
	home := t.TempDir()
	if cfg != "" {
		if err := os.WriteFile(home+"/config.yaml", []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Runs after the sidecar is stopped: the daemon it started goes too.
	testbin.StopDaemon(t, home)
	all := append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)
	p := startProcess(t, []string{"HINDSIGHT_HOME=" + home}, bin, all...)
	p.home = home
	return awaitListening(t, p), p
}

// awaitListening waits for `hindsight serve` to report its address and
// returns its base URL; its stderr goes to the test log.
func awaitListening(t *testing.T, p *program) string {
	t.Helper()
	stderr := p.stderr
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("hindsight serve exited before listening")
			}
			if m := listeningRE.FindStringSubmatch(l); m != nil {
				go func() {
					for l := range lines {
						t.Log("serve:", l)
					}
				}()
				return "http://" + m[1]
			}
			t.Log("serve:", l)
		case <-timeout:
			t.Fatal("hindsight serve did not report its address")
		}
	}
}

// transcript is what a conversation produced, normalised for comparison.
type transcript struct {
	entries  map[string]string
	progress int
}

func (tr *transcript) add(t *testing.T, key string, v any, err error) {
	t.Helper()
	if err != nil {
		tr.entries[key] = "error: " + err.Error()
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	tr.entries[key] = string(b)
}

// converse runs the same conversation over any transport: listings,
// prompts, resources, completions, tools with progress, sampling,
// elicitation and roots round trips, structured content, images and an
// isError result.
func converse(t *testing.T, transport mcp.Transport) *transcript {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	defer func() { t.Logf("conversation over %T took %v", transport, time.Since(start).Round(time.Millisecond)) }()
	var progress atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "interop-test", Version: "1.0.0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant",
				Content: &mcp.TextContent{Text: "sampled: " + fmt.Sprint(len(req.Params.Messages))}}, nil
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress.Add(1)
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///tmp/interop-root", Name: "interop"})
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	tr := &transcript{entries: map[string]string{}}
	init := cs.InitializeResult()
	tr.add(t, "initialize", map[string]any{"server": init.ServerInfo, "instructions": init.Instructions,
		"capabilities": init.Capabilities, "protocol": init.ProtocolVersion}, nil)

	// The conditional tools appear once the server has seen initialized.
	var tools *mcp.ListToolsResult
	for range 50 {
		tools, err = cs.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) > 0 && testkit.HasTool(tools, "trigger-sampling-request") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tools != nil {
		sort.Slice(tools.Tools, func(i, j int) bool { return tools.Tools[i].Name < tools.Tools[j].Name })
	}
	tr.add(t, "tools/list", tools, err)
	prompts, err := cs.ListPrompts(ctx, nil)
	tr.add(t, "prompts/list", prompts, err)
	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt", Arguments: map[string]string{"city": "Paris", "state": "Texas"}})
	tr.add(t, "prompts/get", prompt, err)
	res, err := cs.ListResources(ctx, nil)
	tr.add(t, "resources/list", res, err)
	tmpl, err := cs.ListResourceTemplates(ctx, nil)
	tr.add(t, "resources/templates/list", tmpl, err)
	if err == nil && res != nil && len(res.Resources) > 0 {
		read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: res.Resources[0].URI})
		tr.add(t, "resources/read", read, err)
	}
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "completable-prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "department", Value: "S"},
	})
	tr.add(t, "completion/complete", comp, err)

	call := func(key, name string, args any, meta mcp.Meta) {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
		tr.add(t, key, r, err)
	}
	call("echo", "echo", map[string]any{"message": "hello ☃"}, nil)
	call("structured", "get-structured-content", map[string]any{"location": "New York"}, nil)
	call("image", "get-tiny-image", map[string]any{}, nil)
	call("annotated", "get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}, nil)
	call("isError", "get-sum", map[string]any{"a": "not a number", "b": 2}, nil)
	call("unknown-tool", "no-such-tool", map[string]any{}, nil)
	call("long", "trigger-long-running-operation", map[string]any{"duration": 0.5, "steps": 5}, mcp.Meta{"progressToken": "tok-1"})
	// Cancellation: the client gives up on a long call; the session goes on.
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: "trigger-long-running-operation",
		Arguments: map[string]any{"duration": 3, "steps": 3}})
	ccancel()
	tr.entries["cancelled"] = fmt.Sprint(err != nil && cctx.Err() != nil)
	call("after-cancel", "echo", map[string]any{"message": "still here"}, nil)
	call("sampling", "trigger-sampling-request", map[string]any{"prompt": "hi", "maxTokens": 10}, nil)
	call("elicitation", "trigger-elicitation-request", map[string]any{}, nil)
	call("roots", "get-roots-list", map[string]any{}, nil)
	tr.progress = int(progress.Load())
	if os.Getenv("HINDSIGHT_TEST_DUMP") != "" {
		for k, v := range tr.entries {
			t.Logf("%s => %.300s", k, v)
		}
	}
	return tr
}

// compareTranscripts requires the proxied conversation to match the direct
// one entry for entry.
func compareTranscripts(t *testing.T, direct, proxied *transcript) {
	t.Helper()
	for k, want := range direct.entries {
		got, ok := proxied.entries[k]
		switch {
		case !ok:
			t.Errorf("%s: missing through the sidecar", k)
		case got != want:
			t.Errorf("%s differs\n direct:  %.600s\n proxied: %.600s", k, want, got)
		}
	}
	for k := range proxied.entries {
		if _, ok := direct.entries[k]; !ok {
			t.Errorf("%s: only through the sidecar", k)
		}
	}
	if direct.progress != 5 || proxied.progress != direct.progress {
		t.Errorf("progress notifications: direct %d, proxied %d; want 5 each", direct.progress, proxied.progress)
	}
}

// checkSane guards against two equally broken conversations.
func checkSane(t *testing.T, tr *transcript) {
	t.Helper()
	for _, k := range []string{"tools/list", "echo", "structured", "image", "long", "sampling", "roots", "prompts/get", "completion/complete"} {
		if strings.HasPrefix(tr.entries[k], "error:") || tr.entries[k] == "" {
			t.Errorf("%s failed: %s", k, tr.entries[k])
		}
	}
	for k, want := range map[string]string{
		"echo":                `hello ☃`,
		"structured":          `"structuredContent":{`,
		"image":               `"type":"image"`,
		"isError":             `"isError":true`,
		"sampling":            `sampled: 1`,
		"roots":               `interop-root`,
		"completion/complete": `"Sales","Support"`,
		"cancelled":           "true",
		"after-cancel":        "still here",
	} {
		if !strings.Contains(tr.entries[k], want) {
			t.Errorf("%s: want %q in %.400s", k, want, tr.entries[k])
		}
	}
}

func TestInteropStreamableHTTP(t *testing.T) {
	up := startEverything(t, "streamableHttp")
	direct := converse(t, &mcp.StreamableClientTransport{Endpoint: up + "/mcp"})
	checkSane(t, direct)
	side := startServe(t, "--upstream", up+"/mcp")
	proxied := converse(t, &mcp.StreamableClientTransport{Endpoint: side + "/mcp"})
	compareTranscripts(t, direct, proxied)
	// The agent's legacy SSE transport in front of the same upstream.
	legacy := converse(t, &mcp.SSEClientTransport{Endpoint: side + "/sse"})
	compareTranscripts(t, direct, legacy)

	// With the default configuration the sidecar's hooks are in place.
	hooked, _ := startServeProc(t, "", "--upstream", up+"/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectStreamable(ctx, t, hooked+"/mcp")
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || !testkit.HasTool(tools, "query_hindsight") || !testkit.HasTool(tools, "echo") {
		t.Errorf("tools/list through the default sidecar: %v; want echo and query_hindsight", err)
	}
}

func TestInteropSSEUpstream(t *testing.T) {
	up := startEverything(t, "sse")
	direct := converse(t, &mcp.SSEClientTransport{Endpoint: up + "/sse"})
	checkSane(t, direct)
	// Auto-detection: the POST is refused, the sidecar falls back to SSE.
	side := startServe(t, "--upstream", up+"/sse")
	proxied := converse(t, &mcp.StreamableClientTransport{Endpoint: side + "/mcp"})
	compareTranscripts(t, direct, proxied)
	forced := startServe(t, "--upstream", up+"/sse", "--upstream-transport", "sse")
	legacy := converse(t, &mcp.SSEClientTransport{Endpoint: forced + "/sse"})
	compareTranscripts(t, direct, legacy)
}

func TestInteropCommandUpstream(t *testing.T) {
	bin := testbin.NPM(t, "mcp-server-everything")
	direct := converse(t, &mcp.CommandTransport{Command: exec.Command(bin, "stdio")})
	checkSane(t, direct)
	side, serve := startServeProc(t, relayOnly, "--", bin, "stdio")
	proxied := converse(t, &mcp.StreamableClientTransport{Endpoint: side + "/mcp"})
	compareTranscripts(t, direct, proxied)
	legacy := converse(t, &mcp.SSEClientTransport{Endpoint: side + "/sse"})
	compareTranscripts(t, direct, legacy)

	// A session left open holds a child; SIGTERM ends it with the sidecar.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectStreamable(ctx, t, side+"/mcp")
	defer cs.Close()
	kids := serverChildren(serve.cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("no server child under the sidecar")
	}
	serve.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-serve.done:
	case <-time.After(20 * time.Second):
		t.Fatal("hindsight serve did not exit on SIGTERM")
	}
	if code := serve.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	for _, pid := range kids {
		if !testkit.ProcessGone(pid) {
			t.Errorf("server child %d outlived the sidecar", pid)
		}
	}
}

// connectStreamable connects an MCP client to the Streamable HTTP
// endpoint url.
func connectStreamable(ctx context.Context, t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// serverChildren lists the child processes of pid (started from any
// thread) that run the everything server.
func serverChildren(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(b)) {
			var n int
			fmt.Sscan(f, &n)
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n))
			if bytes.Contains(cmdline, []byte("mcp-server-everything")) {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestServeDeleteSession ends a session with DELETE: the sidecar forgets it
// (404 after) and ends the upstream session too.
func TestServeDeleteSession(t *testing.T) {
	up := startEverything(t, "streamableHttp")
	side := startServe(t, "--upstream", up+"/mcp")
	url := side + "/mcp"
	resp, body := mcpPost(t, http.DefaultClient, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" || !strings.Contains(body, `"serverInfo"`) {
		t.Fatalf("initialize: %d sid=%q %s", resp.StatusCode, sid, body)
	}
	resp, _ = mcpPost(t, http.DefaultClient, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	mcpDelete(t, http.DefaultClient, url, sid)
	resp, _ = mcpPost(t, http.DefaultClient, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("tools/list after DELETE: status %d, want 404", resp.StatusCode)
	}
}

// bearer adds a token to every request of an HTTP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestServeAuthToken runs the real binary with --auth-token and
// --upstream-header in front of the real server: a client without the token
// gets 401, one with it works, and the upstream sees its own credentials,
// never the agent's token.
func TestServeAuthToken(t *testing.T) {
	up := startEverything(t, "streamableHttp")
	var mu sync.Mutex
	var seen []string
	target, _ := url.Parse(up)
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Team"))
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	side := startServe(t, "--upstream", front.URL+"/mcp", "--auth-token", "s3cret-token",
		"--upstream-header", "Authorization: Bearer upstream-cred", "--upstream-header", "X-Team: blue")

	resp, err := http.Post(side+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d, want 401", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	if _, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: side + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{"wrong", http.DefaultTransport}}}, nil); err == nil {
		t.Fatal("connected with a wrong token")
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: side + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{"s3cret-token", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "authorised"}})
	if err != nil || r.IsError {
		t.Fatalf("echo: %v %+v", err, r)
	}
	cs.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("nothing reached the upstream")
	}
	for _, s := range seen {
		if s != "Bearer upstream-cred|blue" {
			t.Errorf("upstream saw Authorization|X-Team = %q, want the --upstream-header values", s)
		}
	}
}

// TestServeUpstream5xx turns a dead upstream into a JSON-RPC error that
// names the failure, through the real binary.
func TestServeUpstream5xx(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "maintenance window", http.StatusServiceUnavailable)
	}))
	defer up.Close()
	side := startServe(t, "--upstream", up.URL+"/mcp", "--upstream-transport", "streamable-http")
	resp, err := http.Post(side+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":"a1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg struct {
		ID    string `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("not JSON-RPC: %s", body)
	}
	if msg.ID != "a1" || !strings.Contains(msg.Error.Message, "upstream HTTP 503") || !strings.Contains(msg.Error.Message, "maintenance window") {
		t.Fatalf("got %s", body)
	}
}
