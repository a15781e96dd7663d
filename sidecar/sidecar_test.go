package sidecar_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/sidecar"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/tidwall/gjson"
)

func TestSidecarFakeServer(t *testing.T) { fakeserver.Main() }

// TestRunStdioDaemonDown runs the stdio sidecar in front of a real server
// process, over pipes, with no daemon to be had (its executable does not
// exist): the agent still gets its answers, with injection's tools, and
// everything the sidecar learnt stays in the outbox: the steps, its
// stats with the server's start, and the end of the task the agent said
// was finished.
func TestRunStdioDaemonDown(t *testing.T) {
	home := hindsight.Home(filepath.Join(t.TempDir(), "home"))
	var log testkit.SyncBuffer
	cfg := sidecar.Config{
		Home:    home,
		Server:  "fake",
		Logger:  slog.New(slog.NewTextHandler(&log, nil)),
		Capture: &capture.Options{},
		EndTask: true,
		Inject:  &inject.Injector{EndTaskTool: true},
		Exe:     filepath.Join(t.TempDir(), "no-hindsight"),
	}
	st := &proxy.Stdio{Command: os.Args[0], Args: fakeserver.Args("TestSidecarFakeServer"),
		Env: fakeserver.Env(fakeserver.ModeMCP, "", "")}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	agent := testkit.NewLineClient(t, "sidecar", inW, outR)
	done := make(chan error, 1)
	go func() {
		done <- sidecar.RunStdio(context.Background(), cfg, st, inR, outW)
		outW.Close()
	}()

	agent.Send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := gjson.Get(agent.Recv(), "id").Int(); got != 1 {
		t.Fatalf("first answer's id %d, want 1", got)
	}
	tools := gjson.Get(agent.Recv(), "result.tools.#.name").String()
	for _, want := range []string{`"echo"`, `"` + inject.QueryToolName + `"`, `"` + inject.EndToolName + `"`} {
		if !strings.Contains(tools, want) {
			t.Errorf("tools/list names %s, want %s among them", tools, want)
		}
	}
	agent.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"` + inject.FinalMetaKey + `":true}}}`)
	if got := gjson.Get(agent.Recv(), "result.content.0.text").String(); got != "hi" {
		t.Errorf("echo answered %q, want hi", got)
	}
	agent.CloseInput()
	if err := <-done; err != nil {
		t.Fatalf("RunStdio: %v", err)
	}

	outboxes := spool.List(home)
	if len(outboxes) != 1 || outboxes[0].Stats == nil {
		t.Fatalf("outboxes %+v, want one with its stats", outboxes)
	}
	s := outboxes[0].Stats
	if s.Server != "fake" || s.Captured < 3 || s.Delivered != 0 || s.ServerStarts != 1 {
		t.Errorf("stats %+v, want server fake, 3 steps or more captured, none delivered, one server start", *s)
	}
	if !strings.Contains(log.String(), "the task's end waits in the outbox") {
		t.Errorf("the task's end was not noted in the outbox; log:\n%s", log.String())
	}
}

// TestServeDaemonDown runs the HTTP sidecar in front of a server command
// (a process per session), with no daemon to be had: the agent's session
// gets injection's tools and its answers, and when the agent deletes the
// session its end is noted in the outbox, after its steps.
func TestServeDaemonDown(t *testing.T) {
	for _, kv := range fakeserver.Vars(fakeserver.ModeMCP, "", "") {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // the server's process inherits them
	}
	home := hindsight.Home(filepath.Join(t.TempDir(), "home"))
	var log testkit.SyncBuffer
	cfg := sidecar.Config{
		Home:    home,
		Server:  "fake",
		Logger:  slog.New(slog.NewTextHandler(&log, nil)),
		Capture: &capture.Options{},
		Inject:  &inject.Injector{},
		Exe:     filepath.Join(t.TempDir(), "no-hindsight"),
	}
	ready := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sidecar.Serve(ctx, cfg, sidecar.HTTP{
			Listen: "127.0.0.1:0", Front: &proxy.HTTPHandler{},
			Command: append([]string{os.Args[0]}, fakeserver.Args("TestSidecarFakeServer")...),
			Target:  "fake", Ready: func(a net.Addr) { ready <- a },
		})
	}()
	var url string
	select {
	case a := <-ready:
		url = "http://" + a.String() + "/mcp"
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	post := func(sid, body string) (string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	sid, body := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if sid == "" {
		t.Fatalf("initialize gave no session: %s", body)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, body = post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); !strings.Contains(body, `"`+inject.QueryToolName+`"`) {
		t.Errorf("tools/list without %s: %s", inject.QueryToolName, body)
	}
	if _, body = post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`); !strings.Contains(body, `"hi"`) {
		t.Errorf("echo answered %s", body)
	}
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %s", resp.Status)
	}
	// The end is noted when the session ends, not only at Close.
	testkit.WaitFor(t, "the session's end noted in the outbox", 30*time.Second, func() bool {
		return strings.Contains(log.String(), "the session's end waits in the outbox")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if outboxes := spool.List(home); len(outboxes) != 1 || outboxes[0].Stats == nil || outboxes[0].Stats.Captured < 3 {
		t.Errorf("outboxes %+v, want one whose stats count 3 steps or more", outboxes)
	}
}
