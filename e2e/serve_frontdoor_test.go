//go:build unix

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestServeOriginAndBodyBudget drives the real `hindsight serve` in front
// of the reference server:
//   - browser Origins: serve's own and those allowed (by flag and by the
//     configuration) pass; a page on another loopback port gets 403 before
//     anything reaches the upstream; a client without Origin passes;
//   - four 100 MiB bodies sent at once over a 128 MiB budget: one is
//     relayed, three are refused with 503 and Retry-After before their
//     bodies are read, and the sidecar's peak RSS (VmHWM) stays under the
//     budget + 100 MB (four bodies read whole would take 400 MiB); the
//     three refusals are counted in `hindsight status` and in the
//     daemon's metrics.
func TestServeOriginAndBodyBudget(t *testing.T) {
	const budget, size = 128 << 20, 100 << 20
	up := startEverything(t, "streamableHttp")
	cfg := relayOnly + "serve:\n  allowed_origins: [\"http://127.0.0.1:7000\"]\n"
	base, serve := startServeProc(t, cfg, "--body-budget", strconv.Itoa(budget), "--allowed-origin", "http://localhost:6274", "--upstream", up+"/mcp")
	side := base + "/mcp"
	addr := strings.TrimPrefix(base, "http://")
	port := addr[strings.LastIndex(addr, ":")+1:]

	for origin, want := range map[string]int{
		"":                         http.StatusOK,
		"http://127.0.0.1:" + port: http.StatusOK,
		"http://localhost:" + port: http.StatusOK,
		"http://localhost:6274":    http.StatusOK, // --allowed-origin
		"http://127.0.0.1:7000":    http.StatusOK, // serve.allowed_origins
		"http://127.0.0.1:6274":    http.StatusForbidden,
		"http://localhost:9":       http.StatusForbidden,
		"https://evil.example":     http.StatusForbidden,
	} {
		req, _ := http.NewRequest(http.MethodPost, side, strings.NewReader(initBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("initialize from Origin %q: %d, want %d", origin, resp.StatusCode, want)
		}
	}

	head := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`
	tail := `"}}`
	length := len(head) + size + len(tail)
	type agent struct {
		conn net.Conn
		resp chan *http.Response
	}
	agents := make([]agent, 4)
	for i := range agents {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Minute)) // a hang fails, not a slow machine
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, length, head)
		agents[i] = agent{c, make(chan *http.Response, 1)}
		go func(a agent) {
			resp, err := http.ReadResponse(bufio.NewReader(a.conn), nil)
			if err != nil {
				close(a.resp)
				return
			}
			io.Copy(io.Discard, resp.Body)
			a.resp <- resp
		}(agents[i])
	}
	refused := map[int]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(refused) < 3 && time.Now().Before(deadline) {
		for i, a := range agents {
			select {
			case resp, ok := <-a.resp:
				if !ok || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("agent %d: %v (ok %v); want 503 with Retry-After", i, resp, ok)
				}
				refused[i] = true
			default:
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(refused) != 3 {
		t.Fatalf("%d of 4 bodies refused over a budget that takes one", len(refused))
	}
	chunk := []byte(strings.Repeat("x", 1<<20))
	for i, a := range agents {
		if refused[i] {
			continue
		}
		for n := 0; n < size; n += len(chunk) {
			if _, err := a.conn.Write(chunk); err != nil {
				t.Fatalf("send the body within the budget: %v", err)
			}
		}
		io.WriteString(a.conn, tail)
		resp := <-a.resp
		if resp == nil || resp.StatusCode == http.StatusServiceUnavailable {
			t.Fatalf("the body within the budget was not relayed: %v", resp)
		}
	}
	hwm := vmHWM(t, serve.cmd.Process.Pid)
	t.Logf("serve's peak RSS: %d MiB (budget %d MiB)", hwm>>20, budget>>20)
	if hwm > budget+100<<20 {
		t.Errorf("serve's peak RSS %d MiB, want under the budget + 100 MB (%d MiB)", hwm>>20, (budget+100<<20)>>20)
	}

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", hindsight.Home(serve.home).Socket())
	}}}
	defer hc.CloseIdleConnections()
	counted := regexp.MustCompile(`(?m)^hindsight_sidecar_bodies_refused_total\{server="[^"]+"\} 3$`)
	var status, metrics string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		out, _ := exec.Command(testbin.Hindsight(t), "--home", serve.home, "status").Output()
		status = string(out)
		if resp, err := hc.Get("http://hindsight/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			metrics = string(b)
		}
		if strings.Contains(status, "3 requests refused over the body budget") && counted.MatchString(metrics) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 3 refusals are not counted: status:\n%s\nmetrics name present: %v", status, strings.Contains(metrics, "bodies_refused"))
		}
	}
}

// vmHWM returns the peak resident set size of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
