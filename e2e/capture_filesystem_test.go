package e2e

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRecordRealFilesystemServer relays a real MCP client and the real
// filesystem server through proxy.Stdio with the Recorder installed, then
// checks the steps delivered: error codes, causal tags (failure, recovery,
// retry), order and redaction.
func TestRecordRealFilesystemServer(t *testing.T) {
	bin := testbin.NPM(t, "mcp-server-filesystem")
	root := t.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	const token = "ghp_Vb3Kx9Lq2Wm7Zt4Rn8Ps1Jd6Hf0Yc5Ga2Ue7"
	const password = "Qz8vN2kLp5Xw9Tr4"
	os.WriteFile(filepath.Join(root, "config.yaml"), []byte("github_token: "+token+"\ndatabase:\n  password: "+password+"\n"), 0o600)

	home := hindsight.Home(t.TempDir())
	red, err := capture.NewRedactor(capture.RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	d := &stepSink{}
	rec, err := capture.New(capture.Options{Home: home, Server: "filesystem", Redactor: red, Deliverer: d, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	relay := &proxy.Stdio{Command: bin, Args: []string{root}, Server: "filesystem",
		Hooks: &proxy.Hooks{Exchange: rec.Hook}, Logger: quietLogger}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- relay.Run(ctx, inR, outW) }()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "capture-e2e", Version: "1.0"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}
	if !call("read_text_file", map[string]any{"path": filepath.Join(root, "config.yml")}).IsError {
		t.Fatal("reading a missing file succeeded")
	}
	call("list_directory", map[string]any{"path": root})
	cfg := map[string]any{"path": filepath.Join(root, "config.yaml")}
	if res := call("read_text_file", cfg); res.IsError {
		t.Fatalf("read config: %+v", res.Content)
	}
	call("read_text_file", cfg)
	if !call("write_file", map[string]any{"path": "/etc/hindsight-test", "content": "x"}).IsError {
		t.Fatal("writing outside the root succeeded")
	}
	cs.Close()
	inW.Close()
	if err := <-runDone; err != nil {
		t.Logf("relay: %v", err)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}

	type want struct{ tool, tag, code string }
	wants := []want{
		{"read_text_file", "failure", "errno-ENOENT"},
		{"list_directory", "success", ""},
		{"read_text_file", "recovery", ""},
		{"read_text_file", "retry", ""},
		{"write_file", "failure", "errno-EACCES"},
	}
	var calls []hindsight.Step
	for i, s := range d.got() {
		if s.Seq != uint64(i+1) || s.Source != rec.Source() {
			t.Fatalf("step %d: seq %d source %s", i, s.Seq, s.Source)
		}
		if strings.Contains(string(s.Request)+string(s.Response)+string(s.Result), token) ||
			strings.Contains(string(s.Response), password) {
			t.Errorf("secret delivered in step %d: %s", s.Seq, s.Response)
		}
		if s.Method == "tools/call" {
			calls = append(calls, s)
		}
	}
	if len(calls) != len(wants) {
		t.Fatalf("%d tool calls recorded, want %d", len(calls), len(wants))
	}
	for i, w := range wants {
		s := calls[i]
		if s.Tool != w.tool || string(s.CausalTag) != w.tag || s.ErrorCode != w.code {
			t.Errorf("call %d: %s %s %q, want %s %s %q", i, s.Tool, s.CausalTag, s.ErrorCode, w.tool, w.tag, w.code)
		}
		if s.ClientName != "capture-e2e" || s.Transport != "stdio" || s.Server != "filesystem" || s.LatencyMS <= 0 {
			t.Errorf("call %d: client %q transport %q server %q latency %v", i, s.ClientName, s.Transport, s.Server, s.LatencyMS)
		}
	}
	if calls[2].Redactions < 2 {
		t.Errorf("config read: %d redactions, want the token and the password", calls[2].Redactions)
	}
}

// quietLogger discards what it is given.
var quietLogger = slog.New(slog.DiscardHandler)

// stepSink is a daemon that takes every step it is delivered.
type stepSink struct {
	mu    sync.Mutex
	steps []hindsight.Step
}

func (d *stepSink) Deliver(_ context.Context, steps []hindsight.Step) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.steps = append(d.steps, steps...)
	return nil
}

// got returns the steps delivered so far.
func (d *stepSink) got() []hindsight.Step {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]hindsight.Step(nil), d.steps...)
}
