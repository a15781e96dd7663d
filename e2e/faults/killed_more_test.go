//go:build linux

package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestKilledMidBurst SIGKILLs a real `hindsight wrap` in the middle of a
// burst: 32 calls in flight, killed as soon as the agent has read 150
// answers. The next sidecar drains the dead one's outbox (its journal
// may end in a torn record): every answered call is in the daemon's
// traces exactly once, and no call at all is there twice.
func TestKilledMidBurst(t *testing.T) {
	const total, answered, inflight = 400, 150, 32
	home := plainHome(t)
	a := wrapFake(t, home)
	a.initialize()
	pad := strings.Repeat("x", 300)
	sent, got := 0, 0
	for got < answered {
		for sent < total && sent-got < inflight {
			b, _ := json.Marshal(fmt.Sprintf("m-%d-%s", sent, pad))
			a.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%s}}}`, sent+1, b))
			sent++
		}
		if l := a.Recv(); !strings.Contains(l, fmt.Sprintf(`"id":%d,`, got+1)) || !strings.Contains(l, fmt.Sprintf("m-%d-", got)) {
			t.Fatalf("call %d answered %.200s", got+1, l)
		}
		got++
	}
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()

	next := wrapFake(t, home)
	next.initialize()
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()
	var stored map[string]int
	testkit.WaitFor(t, "every answered call recorded", 30*time.Second, func() bool {
		stored = echoTexts(t, c)
		n := 0
		for i := range answered {
			if stored[fmt.Sprintf("m-%d-", i)] > 0 {
				n++
			}
		}
		return n == answered
	})
	for head, n := range stored {
		if n != 1 {
			t.Errorf("%s recorded %d times", head, n)
		}
	}
	t.Logf("%d answered, %d recorded (%d sent)", answered, len(stored), sent)
	next.CloseInput()
	next.cmd.Wait()
}

// TestKilledServeLosesNoAnsweredCall makes 60 calls through a real
// `hindsight serve` (an HTTP client, 6 in flight, in front of a command
// upstream), reads every answer and SIGKILLs the sidecar at once. The
// next sidecar drains the dead one's outbox: every answered call is in
// the daemon's traces exactly once.
func TestKilledServeLosesNoAnsweredCall(t *testing.T) {
	const calls, inflight = 60, 6
	home := plainHome(t)
	cmd := exec.Command(testbin.Hindsight(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--name", "fake", "--", os.Args[0]},
		fakeserver.Args("TestFaultsFakeServer")...)...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	cmd.Env = append(cmd.Env, fakeserver.Vars(fakeserver.ModeMCP, "", "")...)
	url := startServe(t, cmd)

	post := func(sid, body string) (string, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Error(err)
			return "", ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.Header.Get("Mcp-Session-Id")
	}
	out, sid := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"faults","version":"1"}}}`)
	if sid == "" || !strings.Contains(out, "serverInfo") {
		t.Fatalf("initialize answered %q (session %q)", out, sid)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	pad := strings.Repeat("y", 200)
	var wg sync.WaitGroup
	next := make(chan int)
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				text := fmt.Sprintf("s-%d-%s", i, pad)
				if out, _ := post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, i+1, text)); !strings.Contains(out, text) {
					t.Errorf("call %d answered %.200q", i+1, out)
				}
			}
		}()
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	a := wrapFake(t, home) // drains the dead sidecar's outbox
	a.initialize()
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()
	var stored map[string]int
	testkit.WaitFor(t, "every answered call recorded", 30*time.Second, func() bool {
		stored = echoTexts(t, c)
		return len(stored) >= calls
	})
	for i := range calls {
		if n := stored[fmt.Sprintf("s-%d-", i)]; n != 1 {
			t.Errorf("call %d recorded %d times", i, n)
		}
	}
	a.CloseInput()
	a.cmd.Wait()
	if l := lossesOf(status(t, home), "fake"); l.Lost != 0 {
		t.Errorf("status counts %d lost steps: %+v", l.Lost, l)
	}
}

// startServe starts cmd, a `hindsight serve`, and returns its /mcp URL
// once it reports it; its stderr goes to the test log.
func startServe(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if _, rest, ok := strings.Cut(line, " on http://"); ok && strings.Contains(line, "hindsight serve:") {
				url, _, _ := strings.Cut(rest, " ")
				select {
				case urls <- "http://" + url:
				default:
				}
			}
		}
	}()
	select {
	case url := <-urls:
		return url
	case <-time.After(time.Minute):
		t.Fatal("hindsight serve did not report its address")
		return ""
	}
}
