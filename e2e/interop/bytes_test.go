//go:build unix

package interop

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
)

// TestInteropFakeServer is not a test: it is the scripted MCP server the
// byte-level tests start behind the sidecar (this binary, re-executed).
func TestInteropFakeServer(t *testing.T) { fakeserver.Main() }

// rawAgent speaks raw lines to a `hindsight wrap` process.
type rawAgent struct {
	*testkit.LineClient
	t   *testing.T
	cmd *exec.Cmd
}

// wrapFake starts `hindsight wrap` in front of the fake server in mode.
// It returns the agent and the file the server records received lines in.
func wrapFake(t *testing.T, mode string) (*rawAgent, string) {
	t.Helper()
	a, record, _ := wrapFakePIDs(t, mode)
	return a, record
}

// wrapFakePIDs is wrapFake that also returns the file the fake server
// writes its pid to.
func wrapFakePIDs(t *testing.T, mode string) (*rawAgent, string, string) {
	t.Helper()
	dir := t.TempDir()
	record, pids := filepath.Join(dir, "record"), filepath.Join(dir, "pids")
	cmd := wrapped(t, "fake", append([]string{os.Args[0]}, fakeserver.Args("TestInteropFakeServer")...)...)
	cmd.Env = append(cmd.Env, fakeserver.Vars(mode, record, pids)...)
	cmd.Stderr = os.Stderr
	a := &rawAgent{LineClient: testkit.StartLineClient(t, cmd, "hindsight wrap"), t: t, cmd: cmd}
	return a, record, pids
}

func (a *rawAgent) expect(want string) {
	a.t.Helper()
	if got := a.Recv(); got != want {
		a.t.Fatalf("agent got\n %s\nwant\n %s", got, want)
	}
}

// close ends the agent's stdin and returns the sidecar's exit error.
func (a *rawAgent) close() error {
	a.t.Helper()
	a.CloseInput()
	for range a.Lines() {
	}
	return a.cmd.Wait()
}

// TestWrapBytes checks, through the real binary, that unknown methods and
// unknown members survive both ways byte for byte: in requests, responses,
// notifications, _meta, a root anyOf in a tool's schema, and batches.
func TestWrapBytes(t *testing.T) {
	a, record := wrapFake(t, fakeserver.ModeMCP)
	fromAgent := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{"form":{}},"roots":{"listChanged":true},"x-cap":{"deep":[1]}},"clientInfo":{"name":"raw","version":"0.1","x-info":true},"_meta":{"vendor.example/trace":"abc"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","x-extra":1}`,
	}
	a.Send(fromAgent...)
	a.expect(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"x-experimental-cap":{}},"serverInfo":{"name":"fakeserver","version":"1.0.0"},"instructions":"fake","x-unknown":[1,{"a":null}]}}`)

	listReq := `{"jsonrpc":"2.0","id":"list-1","method":"tools/list","params":{"cursor":null,"_meta":{"progressToken":"p-list"}}}`
	a.Send(listReq)
	fromAgent = append(fromAgent, listReq)
	a.expect(`{"jsonrpc":"2.0","id":"list-1","result":` + fakeserver.ToolsList + `}`)

	// Unknown methods, odd spacing, escapes and numbers the way they were
	// written: the server echoes the exact line it received.
	odd := []string{
		`{"jsonrpc":"2.0","id":17,"method":"fake/echo","params":{"n":1.0e+2,"big":123456789012345678901234567890,"s":"\u00e9\ud83d\ude00\/","nested":{"_meta":{"k":[]}}}}`,
		`  {"method":"fake/echo","jsonrpc":"2.0","id":"\u0041","params":{}}  `,
		`{"jsonrpc":"2.0","id":18,"method":"fake/echo","params":{"x-unknown":{"anyOf":[{"type":"string"},{"type":"null"}]}},"x-top-level":"kept"}`,
	}
	for _, l := range odd {
		a.Send(l)
		var echo struct{ Result struct{ Line string } }
		got := a.Recv()
		if err := json.Unmarshal([]byte(got), &echo); err != nil {
			t.Fatalf("echo answer %s: %v", got, err)
		}
		if want := strings.TrimRight(l, " "); echo.Result.Line != want {
			t.Errorf("server received\n %s\nagent sent\n %s", echo.Result.Line, want)
		}
	}

	// Server → agent: unknown notifications, requests with unknown members,
	// progress and cancellation, exactly as the server wrote them.
	fromServer := []string{
		`{"jsonrpc":"2.0","method":"notifications/vendor/hello","params":{"_meta":{"vendor.example/x":1},"data":[true,null]}}`,
		`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi","x-c":1}}],"maxTokens":5,"x-future":{}}}`,
		`{"jsonrpc":"2.0","id":"s2","method":"elicitation/create","params":{"mode":"form","message":"m","requestedSchema":{"type":"object","properties":{}}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"roots/list","params":{"_meta":{"a":"b"}}}`,
		`{"jsonrpc":"2.0","id":"s4","method":"vendor/ask","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-list","progress":0.5,"total":1,"message":"half"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s4","reason":"changed my mind"}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"result":{},"id":"stray","jsonrpc":"2.0","x-late":true}`,
	}
	say, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "fake/say", "params": map[string]any{"lines": fromServer}})
	a.Send(string(say))
	fromAgent = append(fromAgent, string(say))
	for _, want := range fromServer {
		a.expect(want)
	}
	// The agent's answers, with members no SDK knows, reach the server as sent.
	answers := []string{
		`{"jsonrpc":"2.0","id":"s1","result":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m","stopReason":"endTurn","x-usage":{"tokens":3}}}`,
		`{"jsonrpc":"2.0","id":"s2","result":{"action":"accept","content":{"name":"Ada"},"_meta":{"k":1}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"roots":[{"uri":"file:///w","name":"w","_meta":{}}],"x-more":[]}}`,
		`{"jsonrpc":"2.0","id":"s4","error":{"code":-32601,"message":"unknown","data":{"x":1}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"list-1","reason":"r","x-why":0}}`,
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"_meta":{}}}`,
		`[{"jsonrpc":"2.0","id":90,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"}]`,
		`{"jsonrpc":"2.0","method":"vendor/notify","params":{"anything":"goes"}}`,
	}
	a.Send(answers...)
	fromAgent = append(fromAgent, answers...)
	a.Send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	fromAgent = append(fromAgent, `{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	a.expect(`{"jsonrpc":"2.0","id":99,"result":{}}`)
	if err := a.close(); err != nil {
		t.Fatalf("hindsight wrap exited with %v", err)
	}

	got := fakeserver.Recorded(t, record)
	want := append(fromAgent[:3:3], odd...)
	want = append(want, fromAgent[3:]...)
	for i := range want {
		want[i] = strings.TrimRight(want[i], " ")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the server received:\n%s\n\nthe agent sent:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWrapCrashAndRestart crashes the server behind the real binary.
func TestWrapCrashAndRestart(t *testing.T) {
	a, record := wrapFake(t, fakeserver.ModeMCP)
	a.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	a.Recv()
	a.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":{"status":7}}}`)
	a.expect(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"MCP server \"fake\" exited unexpectedly (exit status 7) before answering; it is being restarted"}}`)
	a.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"back"}}}`)
	a.expect(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"back"}]}}`)
	if err := a.close(); err != nil {
		t.Fatalf("hindsight wrap exited with %v", err)
	}
	n := 0
	for _, l := range fakeserver.Recorded(t, record) {
		if strings.Contains(l, `"method":"initialize"`) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("the server saw %d initialize requests, want 2 (the replay)", n)
	}
}

// TestWrapCommandLine checks the exit status of bad invocations.
func TestWrapCommandLine(t *testing.T) {
	tests := []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"wrap"}, 2, "wrap needs the server's command"},
		{[]string{"wrap", "--bogus", "--", "x"}, 2, "unknown flag: --bogus"},
		{[]string{"wrap", "--", filepath.Join(t.TempDir(), "missing-server")}, 1, "start server missing-server"},
	}
	for _, tt := range tests {
		cmd := wrapped(t, "x")
		cmd.Args = append([]string{"hindsight"}, tt.args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tt.status || !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("hindsight %q: %v, stderr %q; want status %d and %q", tt.args, err, stderr.String(), tt.status, tt.stderr)
		}
	}
}

// serverPID waits for the fake server to record its pid.
func serverPID(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
	}
	t.Fatal("the fake server did not record its pid")
	return 0
}

func waitExit(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("hindsight wrap did not exit")
	}
	return nil
}

// TestWrapSignals checks that SIGTERM to the sidecar stops it and its
// server, with exit status 0.
func TestWrapSignals(t *testing.T) {
	a, _, pids := wrapFakePIDs(t, fakeserver.ModeMCP)
	pid := serverPID(t, pids)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	a.expect(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	must(t, "signal", a.cmd.Process.Signal(syscall.SIGTERM))
	if err := waitExit(t, a.cmd); err != nil {
		t.Errorf("hindsight wrap after SIGTERM: %v, want exit status 0", err)
	}
	testkit.WaitGone(t, pid)
}

// TestWrapAgentGone closes the agent's end of the sidecar's stdout: the
// next write fails, and the sidecar stops its server and exits with an
// error instead of dying of SIGPIPE or running on.
func TestWrapAgentGone(t *testing.T) {
	a, _, pids := wrapFakePIDs(t, fakeserver.ModeMCP)
	pid := serverPID(t, pids)
	a.CloseOutput()
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	err := waitExit(t, a.cmd)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("hindsight wrap with its stdout gone: %v, want exit status 1", err)
	}
	testkit.WaitGone(t, pid)
}

// TestWrapBrokenHome gives the sidecar a HINDSIGHT_HOME it cannot use: it
// must still relay (logging to stderr), because Hindsight's trouble must
// not cost the agent its server.
func TestWrapBrokenHome(t *testing.T) {
	skipShort(t)
	notDir := filepath.Join(t.TempDir(), "file")
	must(t, "write", os.WriteFile(notDir, nil, 0o600))
	cmd := wrapped(t, "fake", append([]string{os.Args[0]}, fakeserver.Args("TestInteropFakeServer")...)...)
	cmd.Env = append(cmd.Env, fakeserver.Vars(fakeserver.ModeMCP, "", "")...)
	cmd.Env = append(cmd.Env, "HINDSIGHT_HOME="+notDir)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n" {
		t.Fatalf("hindsight wrap with a broken home: %v, stdout %q, stderr:\n%s", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "logging to stderr") {
		t.Errorf("stderr lacks the warning:\n%s", stderr.String())
	}
}
