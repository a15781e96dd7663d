//go:build unix

package interop

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startBackground runs a program in its own process group, its stderr
// scanned by onLine, and stops the group when the test ends.
func startBackground(t *testing.T, env []string, onLine func(string), name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	must(t, "stderr pipe", err)
	must(t, "start "+name, cmd.Start())
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			onLine(sc.Text())
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
}

// everythingHTTP runs the everything server in streamableHttp mode and
// returns its endpoint.
func everythingHTTP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, "free port", err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	startBackground(t, []string{fmt.Sprintf("PORT=%d", port)}, func(string) {}, testbin.NPM(t, "mcp-server-everything"), "streamableHttp")
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		}
		if time.Now().After(deadline) {
			t.Fatal("the everything server did not listen")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var serveAddrRE = regexp.MustCompile(`on http://([^/\s]+)/mcp`)

// serveHTTP runs `hindsight serve` (relay only) in front of upstream and
// returns its base URL.
func serveHTTP(t *testing.T, upstream string) string {
	t.Helper()
	home := t.TempDir()
	must(t, "write config", os.WriteFile(home+"/config.yaml", []byte("inject:\n  instructions: false\n  error_results: false\n  query_tool: false\n"), 0o600))
	testbin.StopDaemon(t, home)
	addr := make(chan string, 1)
	startBackground(t, []string{"HINDSIGHT_HOME=" + home}, func(l string) {
		if m := serveAddrRE.FindStringSubmatch(l); m != nil {
			select {
			case addr <- "http://" + m[1]:
			default:
			}
		}
	}, testbin.Hindsight(t), "serve", "--listen", "127.0.0.1:0", "--upstream", upstream)
	select {
	case a := <-addr:
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("hindsight serve did not report its address")
	}
	return ""
}

// listChanged connects a go-sdk client over transport and reports whether
// it received notifications/tools/list_changed within wait.
func listChanged(t *testing.T, transport mcp.Transport, wait time.Duration) bool {
	t.Helper()
	got := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "interop-list-changed", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { got <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	must(t, "connect", err)
	defer cs.Close()
	select {
	case <-got:
		return true
	case <-time.After(wait):
		return false
	}
}

// TestServerMessagesOnStandaloneStream: the everything server (Streamable
// HTTP) sends notifications/tools/list_changed on its standalone GET
// stream right after notifications/initialized. A go-sdk client receives
// it directly, and must through `hindsight serve` too: the sidecar's own
// GET stream to the server is open before it relays
// notifications/initialized, and what comes on it reaches the agent's.
func TestServerMessagesOnStandaloneStream(t *testing.T) {
	skipShort(t)
	up := everythingHTTP(t)
	if !listChanged(t, &mcp.StreamableClientTransport{Endpoint: up}, 5*time.Second) {
		t.Skip("the everything server sent no tools/list_changed to a direct client: nothing to compare")
	}
	side := serveHTTP(t, up)
	for i := range 3 { // a race lost once in a while would show
		if !listChanged(t, &mcp.StreamableClientTransport{Endpoint: side + "/mcp"}, 5*time.Second) {
			t.Fatalf("session %d through hindsight serve: no notifications/tools/list_changed", i)
		}
	}
}
