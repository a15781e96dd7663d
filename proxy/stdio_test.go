//go:build unix

package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
)

// TestStdioFakeServer is not a test: it is the fake MCP server the stdio
// tests start as a child (this test binary, re-executed).
func TestStdioFakeServer(t *testing.T) { fakeserver.Main() }

// fakeStdio returns a Stdio running the fake server in mode, with short
// delays, logging to the returned buffer. The fake server's received lines
// go to record and its pids to pids (files in a temp dir).
func fakeStdio(t *testing.T, mode string) (st *Stdio, logs *testkit.SyncBuffer, record, pids string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts server processes; not in -short mode")
	}
	dir := t.TempDir()
	record, pids = filepath.Join(dir, "record"), filepath.Join(dir, "pids")
	logs = &testkit.SyncBuffer{}
	st = &Stdio{
		Command:         os.Args[0],
		Args:            fakeserver.Args("TestStdioFakeServer"),
		Env:             fakeserver.Env(mode, record, pids),
		Server:          "fake",
		Logger:          slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		GracePeriod:     300 * time.Millisecond,
		MinRestartDelay: 10 * time.Millisecond,
		MaxRestartDelay: 100 * time.Millisecond,
	}
	return st, logs, record, pids
}

// stdioAgent plays the agent on the other end of a running Stdio.
type stdioAgent struct {
	*testkit.LineClient
	t    *testing.T
	in   *io.PipeWriter // for writes that are not whole lines
	done chan error
}

func runStdio(t *testing.T, st *Stdio) *stdioAgent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &stdioAgent{LineClient: testkit.NewLineClient(t, "the sidecar", inW, outR), t: t, in: inW, done: make(chan error, 1)}
	go func() {
		a.done <- st.Run(context.Background(), inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-a.done:
		case <-time.After(30 * time.Second):
			t.Error("Stdio.Run did not return after the agent closed stdin")
		}
	})
	return a
}

// stop closes the agent's stdin and returns Run's result.
func (a *stdioAgent) stop() error {
	a.t.Helper()
	a.in.Close()
	select {
	case err := <-a.done:
		a.done <- err // for Cleanup
		return err
	case <-time.After(30 * time.Second):
		a.t.Fatal("Stdio.Run did not return after the agent closed stdin")
	}
	return nil
}

const fakeInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"agent","version":"1"}}}`

func (a *stdioAgent) initialize() {
	a.t.Helper()
	a.Send(fakeInit)
	if got := a.Recv(); !strings.Contains(got, `"serverInfo":{"name":"fakeserver"`) {
		a.t.Fatalf("initialize answered %s", got)
	}
	a.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// TestStdioRelaysBytes checks that unknown methods and members pass both
// ways byte for byte, and that stderr goes to the log.
func TestStdioRelaysBytes(t *testing.T) {
	st, logs, record, _ := fakeStdio(t, fakeserver.ModeMCP)
	a := runStdio(t, st)
	a.initialize()

	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"x-agent":[1,2]}}}`)
	if got, want := a.Recv(), `{"jsonrpc":"2.0","id":1,"result":`+fakeserver.ToolsList+`}`; got != want {
		t.Fatalf("tools/list\n got %s\nwant %s", got, want)
	}
	// Agent → server: the server echoes the exact line it received.
	odd := `{ "id" : "ü-1", "jsonrpc":"2.0","method":"fake/echo","params":{"x-unknown":{"n":1.50e3,"s":"\u00fc\ud83d\ude00"},"_meta":{"vendor/k":null}},"x-top":true }`
	a.Send(odd)
	var echo struct {
		ID     string
		Result struct{ Line string }
	}
	if err := json.Unmarshal([]byte(a.Recv()), &echo); err != nil || echo.Result.Line != odd || echo.ID != "ü-1" {
		t.Fatalf("server received %q (%v), want %q", echo.Result.Line, err, odd)
	}
	// Server → agent: notifications, requests and responses of any shape.
	sent := []string{
		`{"jsonrpc":"2.0","method":"notifications/vendor/new","params":{"_meta":{"a":1},"x":[{}]}}`,
		`{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{"messages":[],"x-future":{"deep":[null]}},"x-top":1}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"é"}}`,
		`{"method":"notifications/resources/updated","jsonrpc":"2.0","params":{"uri":"file:///x"}}`,
	}
	say, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "fake/say", "params": map[string]any{"lines": sent}})
	a.Send(string(say))
	for _, want := range sent {
		if got := a.Recv(); got != want {
			t.Fatalf("agent got %s\nwant %s", got, want)
		}
	}
	answer := `{"jsonrpc":"2.0","id":"srv-1","result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m","x-client":{"k":"v"}}}`
	a.Send(answer)
	a.Send(`{"jsonrpc":"2.0","method":"fake/stderr","params":{"lines":["a line on stderr"]}}`)
	a.Send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if got := a.Recv(); got != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Fatalf("ping: %s", got)
	}
	if err := a.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rec := fakeserver.Recorded(t, record)
	found := false
	for _, l := range rec {
		found = found || l == answer
	}
	if !found {
		t.Errorf("the agent's answer did not reach the server byte for byte; server got:\n%s", strings.Join(rec, "\n"))
	}
	if !strings.Contains(logs.String(), "a line on stderr") {
		t.Errorf("stderr not in the log:\n%s", logs)
	}
}

// TestStdioCrash crashes the child with requests in flight: they get an
// error naming the server and the exit status, the child is started again
// with the agent's handshake replayed, and the next call works.
func TestStdioCrash(t *testing.T) {
	st, logs, record, _ := fakeStdio(t, fakeserver.ModeMCP)
	a := runStdio(t, st)
	a.initialize()
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`)
	a.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash","arguments":{"status":3}}}`)
	got := map[string]string{}
	for range 2 {
		var r struct {
			ID    json.RawMessage
			Error struct {
				Code    int
				Message string
			}
		}
		line := a.Recv()
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		got[string(r.ID)] = r.Error.Message
		if r.Error.Code != CodeServerUnavailable {
			t.Errorf("error code %d in %s", r.Error.Code, line)
		}
	}
	for _, id := range []string{"1", "2"} {
		if msg := got[id]; !strings.Contains(msg, `"fake"`) || !strings.Contains(msg, "exit status 3") {
			t.Errorf("request %s: error %q does not name the server and exit status", id, msg)
		}
	}
	// Sent at once after the crash: held until the new child is ready.
	a.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"again"}}}`)
	if got := a.Recv(); got != `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"again"}]}}` {
		t.Fatalf("call after the restart: %s (the replayed initialize's answer must not reach the agent)", got)
	}
	if err := a.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rec := fakeserver.Recorded(t, record)
	var inits, initialized []string
	for _, l := range rec {
		if strings.Contains(l, `"method":"initialize"`) {
			inits = append(inits, l)
		}
		if strings.Contains(l, `notifications/initialized`) {
			initialized = append(initialized, l)
		}
	}
	wantReplay := strings.Replace(fakeInit, `"id":0`, `"id":"hindsight-replay-1"`, 1)
	if len(inits) != 2 || inits[0] != fakeInit || inits[1] != wantReplay || len(initialized) != 2 {
		t.Fatalf("server saw initialize %q and initialized %d times", inits, len(initialized))
	}
	if !strings.Contains(logs.String(), "exit status 3") {
		t.Errorf("crash not logged:\n%s", logs)
	}
}

// TestStdioCrashLoop checks that a server that dies at start is restarted
// with a growing, capped delay and that the log is rate-limited.
func TestStdioCrashLoop(t *testing.T) {
	st, logs, _, pids := fakeStdio(t, fakeserver.ModeFailStart)
	st.MinRestartDelay, st.MaxRestartDelay = 5*time.Millisecond, 40*time.Millisecond
	a := runStdio(t, st)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if got := a.Recv(); !strings.Contains(got, "exit status 1") {
		t.Fatalf("ping during a crash loop: %s", got)
	}
	// A loaded machine may take long to start a process: wait for a few
	// restarts rather than a fixed second, then bound the rate.
	begin := time.Now()
	testkit.WaitFor(t, "three restarts", 30*time.Second, func() bool { return len(fakeserver.Recorded(t, pids)) >= 4 })
	if d := time.Second - time.Since(begin); d > 0 {
		time.Sleep(d)
	}
	if err := a.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	elapsed := time.Since(begin)
	starts := len(fakeserver.Recorded(t, pids))
	// 5ms, 10ms, 20ms, then 40ms: at most ~30 starts a second, even with
	// jitter; a spinning loop would start hundreds.
	if limit := int(60 * (elapsed.Seconds() + 1)); starts > limit {
		t.Errorf("%d starts in %v (at most %d)", starts, elapsed.Round(time.Millisecond), limit)
	}
	for _, msg := range []string{"server exited unexpectedly", "server restarted"} {
		if n := strings.Count(logs.String(), msg); n > 6 || n < 1 {
			t.Errorf("%d %q log lines for %d starts; want a burst of at most 5 (+1)", n, msg, starts)
		}
	}
}

func TestStdioStartFailure(t *testing.T) {
	st := &Stdio{Command: filepath.Join(t.TempDir(), "no-such-server"), Server: "missing",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err := st.Run(context.Background(), strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Run = %v, want an error naming the server", err)
	}
}

func pidsOf(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pids []int
		for _, l := range fakeserver.Recorded(t, path) {
			if p, err := strconv.Atoi(l); err == nil {
				pids = append(pids, p)
			}
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pids recorded, want %d", len(pids), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStdioStop covers children that do not exit when their stdin closes:
// one that obeys SIGTERM, one that ignores it, and one with a grandchild.
func TestStdioStop(t *testing.T) {
	tests := []struct {
		mode    string
		pids    int
		wantLog []string
	}{
		{fakeserver.ModeHang, 1, []string{"sending SIGTERM", "signal: terminated"}},
		{fakeserver.ModeStubborn, 1, []string{"sending SIGTERM", "sending SIGKILL", "signal: killed"}},
		{fakeserver.ModeGrandchild, 2, []string{"exit status 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			st, logs, _, pidFile := fakeStdio(t, tt.mode)
			a := runStdio(t, st)
			pids := pidsOf(t, pidFile, tt.pids)
			a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`)
			if err := a.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, p := range pids {
				testkit.WaitGone(t, p)
			}
			// The request in flight was answered before Run returned
			// (and closed its output, which ends a.Lines()).
			var out []string
			for l := range a.Lines() {
				out = append(out, l)
			}
			if len(out) != 1 || !strings.Contains(out[0], `"id":1,"error"`) || !strings.Contains(out[0], "shutting down") {
				t.Errorf("pending request answered %q", out)
			}
			for _, w := range tt.wantLog {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, logs)
				}
			}
		})
	}
}

// TestStdioBadInput sends garbage and an over-long line between good ones.
func TestStdioBadInput(t *testing.T) {
	st, logs, _, _ := fakeStdio(t, fakeserver.ModeMCP)
	st.MaxLineBytes = 4 << 10
	a := runStdio(t, st)
	a.initialize()
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call"`)
	if got := a.Recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`) {
		t.Fatalf("garbage answered %s", got)
	}
	a.Send(`{"id":2,"method":"ping"}`)
	if got := a.Recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":2,"error":{"code":-32600,`) {
		t.Fatalf("invalid request answered %s", got)
	}
	a.Send("")
	a.Send("   ")
	a.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 5<<10) + `"}}}`)
	a.Send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	// The over-long request is answered, with the id its first bytes show.
	if got := a.Recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid Request: message of `) {
		t.Fatalf("over-long request answered %s", got)
	}
	if got := a.Recv(); got != `{"jsonrpc":"2.0","id":4,"result":{}}` {
		t.Fatalf("after bad input: %s", got)
	}
	if !strings.Contains(logs.String(), "exceeds the limit") {
		t.Errorf("over-long line not logged:\n%s", logs)
	}
	// The server's over-long answer is dropped and logged too.
	a.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"big","arguments":{"size":8192}}}`)
	a.Send(`{"jsonrpc":"2.0","method":"fake/say","params":{"lines":["not json at all"]}}`)
	a.Send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	if got := a.Recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"the server's answer was dropped: message of `) {
		t.Fatalf("the dropped answer was replaced by %s", got)
	}
	if got := a.Recv(); got != `{"jsonrpc":"2.0","id":6,"result":{}}` {
		t.Fatalf("after a dropped answer: %s", got)
	}
	if !strings.Contains(logs.String(), "server message too long") || !strings.Contains(logs.String(), "not json at all") {
		t.Errorf("dropped server lines not logged:\n%s", logs)
	}
	// A message buffered just before an over-long line is still sent at
	// once, in both directions.
	long := strings.Repeat("z", 5<<10)
	if _, err := io.WriteString(a.in, `{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\n"+long+"\n"); err != nil {
		t.Fatal(err)
	}
	// The over-long line is answered too (null id: none can be read),
	// possibly before the ping's answer comes back from the server.
	got := []string{a.Recv(), a.Recv()}
	slices.Sort(got)
	if got[0] != `{"jsonrpc":"2.0","id":7,"result":{}}` || !strings.HasPrefix(got[1], `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`) {
		t.Fatalf("ping before an over-long line: %s", got)
	}
	a.Send(`{"jsonrpc":"2.0","method":"fake/say","params":{"lines":["{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}"],"junk":5000}}`)
	if got := a.Recv(); got != `{"jsonrpc":"2.0","method":"notifications/x"}` {
		t.Fatalf("notification before an over-long line: %s", got)
	}
}

// TestStdioLarge passes 20 MB each way.
func TestStdioLarge(t *testing.T) {
	st, _, _, _ := fakeStdio(t, fakeserver.ModeMCP)
	a := runStdio(t, st)
	a.initialize()
	const size = 20 << 20
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"size":` + strconv.Itoa(size) + `}}}`)
	want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}]}}`
	if got := a.Recv(); got != want {
		t.Fatalf("20 MB result: got %d bytes, want %d", len(got), len(want))
	}
	req := `{"jsonrpc":"2.0","id":2,"method":"fake/digest","params":{"text":"` + strings.Repeat("0123456789", size/10) + `"}}`
	sum := sha256.Sum256([]byte(req))
	a.Send(req)
	if got, want := a.Recv(), `{"jsonrpc":"2.0","id":2,"result":{"bytes":`+strconv.Itoa(len(req))+`,"sha256":"`+hex.EncodeToString(sum[:])+`"}}`; got != want {
		t.Fatalf("20 MB request: the server saw %s, want %s", got, want)
	}
}

// TestStdioLocalCall answers a tools/call in the sidecar.
func TestStdioLocalCall(t *testing.T) {
	st, _, record, _ := fakeStdio(t, fakeserver.ModeMCP)
	release := make(chan struct{})
	st.Hooks = &Hooks{ToolCall: func(s *Session, name string, params json.RawMessage) LocalHandler {
		if name != "query_hindsight" {
			return nil
		}
		return func(ctx context.Context) (json.RawMessage, error) {
			<-release
			return json.RawMessage(`{"content":[{"type":"text","text":"local"}]}`), nil
		}
	}}
	a := runStdio(t, st)
	a.initialize()
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"query_hindsight","arguments":{}}}`)
	// The relay is not blocked by a slow local handler.
	a.Send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if got := a.Recv(); got != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Fatalf("ping behind a local call: %s", got)
	}
	close(release)
	if got := a.Recv(); got != `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"local"}]}}` {
		t.Fatalf("local call: %s", got)
	}
	a.stop()
	if strings.Contains(strings.Join(fakeserver.Recorded(t, record), "\n"), "query_hindsight") {
		t.Errorf("the local call reached the server")
	}
}

func TestNewStdioSession(t *testing.T) {
	t.Setenv("HINDSIGHT_TASK_ID", "from-the-environment") // the command line's to read, not the library's
	a, b := NewStdioSession("srv"), NewStdioSession("srv")
	if a.ID == "" || a.ID == b.ID {
		t.Errorf("ids %q %q: want random, distinct", a.ID, b.ID)
	}
	if a.HostPID != os.Getppid() || a.TaskID != "" || a.Transport != "stdio" || a.Server != "srv" {
		t.Errorf("session %+v", a)
	}
	if r := (&Stdio{Command: "srv", TaskID: "task-7"}).newRelay(NewLineWriter(io.Discard)); r.conn.Session.TaskID != "task-7" {
		t.Errorf("a Stdio with TaskID task-7 gave its session %+v", r.conn.Session)
	}
}

// TestStdioBurst writes several messages and the start of another in one
// write: the complete ones must be answered while the last is incomplete,
// so batching never holds a message back.
func TestStdioBurst(t *testing.T) {
	st, _, _, _ := fakeStdio(t, fakeserver.ModeMCP)
	a := runStdio(t, st)
	a.initialize()
	burst := ""
	for i := 1; i <= 20; i++ {
		burst += `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"ping"}` + "\n"
	}
	if _, err := io.WriteString(a.in, burst+`{"jsonrpc":"2.0","id":21,`); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		if got, want := a.Recv(), `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"result":{}}`; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	a.Send(`"method":"ping"}`)
	if got := a.Recv(); got != `{"jsonrpc":"2.0","id":21,"result":{}}` {
		t.Fatalf("got %s", got)
	}
}

// TestStdioCrashWhileHeld crashes the server again and again while the
// agent's request waits for a restarted server: the request is answered
// exactly once, and the server that finally comes up works.
func TestStdioCrashWhileHeld(t *testing.T) {
	st, _, _, _ := fakeStdio(t, fakeserver.ModeFlaky)
	st.MinRestartDelay, st.MaxRestartDelay = 20*time.Millisecond, 40*time.Millisecond
	a := runStdio(t, st)
	a.initialize()
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":{"status":3}}}`)
	if got := a.Recv(); !strings.Contains(got, "exit status 3") {
		t.Fatalf("crash answered %s", got)
	}
	a.Send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	var answers []string
	for {
		got := a.Recv()
		answers = append(answers, got)
		if strings.Contains(got, `"id":6,"result"`) {
			break
		}
		if strings.Contains(got, `"id":5,`) || strings.Contains(got, `"id":6,"error"`) {
			// Ask until a server is up; each ask is answered once.
			a.Send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
		}
	}
	n5 := 0
	for _, l := range answers {
		if strings.Contains(l, `"id":5,`) {
			n5++
		}
	}
	if n5 != 1 {
		t.Fatalf("request 5 answered %d times: %q", n5, answers)
	}
}

// TestStdioAgentNotReading stops a sidecar whose agent never reads its
// output: Run must still return.
func TestStdioAgentNotReading(t *testing.T) {
	st, logs, _, _ := fakeStdio(t, fakeserver.ModeMCP)
	inR, inW := io.Pipe()
	_, outW := io.Pipe() // nobody reads: every write blocks
	done := make(chan error, 1)
	go func() { done <- st.Run(context.Background(), inR, outW) }()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`+"\n")
	inW.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return with an agent that does not read:\n%s", logs)
	}
	outW.Close()
}

// TestStdioExchangeAfterRelay checks that the Exchange hook runs after the
// response reached the agent: the agent never waits for it.
func TestStdioExchangeAfterRelay(t *testing.T) {
	st, _, _, _ := fakeStdio(t, fakeserver.ModeMCP)
	received := make(chan struct{})
	hookSaw := make(chan bool, 1)
	st.Hooks = &Hooks{Exchange: func(ex *Exchange) {
		if ex.Method != "ping" {
			return
		}
		select {
		case <-received: // the agent has the response already
			hookSaw <- true
		case <-time.After(5 * time.Second):
			hookSaw <- false
		}
	}}
	a := runStdio(t, st)
	a.initialize()
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if got := a.Recv(); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("got %s", got)
	}
	close(received)
	if !<-hookSaw {
		t.Fatal("the Exchange hook ran before the response was relayed to the agent")
	}
}

// watchWriter reports the first write that holds mark.
type watchWriter struct {
	w    io.Writer
	mark []byte
	seen atomic.Bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, w.mark) {
		w.seen.Store(true)
	}
	return w.w.Write(p)
}

// TestStdioRecordBeforeRelay checks that the Record hook sees the exchanges
// of a burst before their answers are written to the agent (a recorder
// killed once the agent has its answer has recorded it), that Exchange
// still sees them afterwards with what Record marked.
func TestStdioRecordBeforeRelay(t *testing.T) {
	st, _, _, _ := fakeStdio(t, fakeserver.ModeMCP)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	watch := &watchWriter{w: outW, mark: []byte(`"id":"watched"`)}
	var recorded, early, unmarked atomic.Int32
	st.Hooks = &Hooks{
		Record: func(exs []*Exchange) {
			for _, ex := range exs {
				if bytes.Contains(ex.Request, []byte(`"watched"`)) {
					recorded.Add(1)
					if watch.seen.Load() {
						early.Add(1)
					}
				}
				ex.Recorded = true
			}
		},
		Exchange: func(ex *Exchange) {
			if !ex.Recorded {
				unmarked.Add(1)
			}
		},
	}
	a := &stdioAgent{LineClient: testkit.NewLineClient(t, "the sidecar", inW, outR), t: t, in: inW, done: make(chan error, 1)}
	go func() {
		a.done <- st.Run(context.Background(), inR, watch)
		outW.Close()
	}()
	a.initialize()
	a.Send(`{"jsonrpc":"2.0","id":"watched","method":"ping"}`)
	if got := a.Recv(); !strings.Contains(got, `"id":"watched"`) {
		t.Fatalf("got %s", got)
	}
	if recorded.Load() != 1 || early.Load() != 0 {
		t.Fatalf("Record saw the watched call %d times, %d of them after its answer was written", recorded.Load(), early.Load())
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if unmarked.Load() != 0 {
		t.Errorf("%d exchanges reached Exchange without Record's mark", unmarked.Load())
	}
}
