//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestFaultsFakeServer is not a test: it is the scripted MCP server these
// tests start behind the sidecar (this binary, re-executed).
func TestFaultsFakeServer(t *testing.T) { fakeserver.Main() }

// smallHome mounts a tmpfs of size bytes and returns a Hindsight home on it
// whose configuration switches injection off and bounds what a sidecar
// holds in memory while its outbox cannot be written to maxHeld bytes.
func smallHome(t *testing.T, size int64, maxHeld int) hindsight.Home {
	t.Helper()
	if testing.Short() {
		t.Skip("mounts a filesystem and starts processes; not in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs for the home (CI runs as root)")
	}
	dir, err := os.MkdirTemp("", "hs-full-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		os.Remove(dir)
		t.Skipf("cannot mount a tmpfs (%v); this test needs a size-limited filesystem", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	home := hindsight.Home(dir)
	if err := home.Ensure(); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("inject:\n  instructions: false\n  error_results: false\n  query_tool: false\noutbox:\n  max_held_bytes: %d\n", maxHeld)
	if err := os.WriteFile(home.Path("config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	testbin.StopDaemon(t, dir) // runs before the unmount
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"wrap-fake.log", "daemon.log"} {
				b, _ := os.ReadFile(home.Path("logs", name))
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("%s:\n%s", name, b)
			}
		}
	})
	return home
}

// agent speaks JSON-RPC lines to a `hindsight wrap` process.
type agent struct {
	*testkit.LineClient
	t   *testing.T
	cmd *exec.Cmd
}

func wrapFake(t *testing.T, home hindsight.Home, env ...string) *agent {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), append([]string{"wrap", "--name", "fake", "--grace", "2s", "--", os.Args[0]},
		fakeserver.Args("TestFaultsFakeServer")...)...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	cmd.Env = append(cmd.Env, fakeserver.Vars(fakeserver.ModeMCP, "", "")...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return &agent{LineClient: testkit.StartLineClient(t, cmd, "hindsight wrap"), t: t, cmd: cmd}
}

// alive reports whether the sidecar still runs.
func (a *agent) alive() bool {
	return a.cmd.Process.Signal(syscall.Signal(0)) == nil && !testkit.ProcessGone(a.cmd.Process.Pid)
}

func (a *agent) initialize() {
	a.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"faults","version":"1"}}}`)
	if l := a.Recv(); !strings.Contains(l, `"serverInfo"`) {
		a.t.Fatalf("initialize answered %s", l)
	}
	a.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// echoCalls makes n echo calls whose texts are prefix-i padded to about
// size bytes, inflight at a time, and checks every answer.
func (a *agent) echoCalls(prefix string, first, n, size, inflight int) {
	a.t.Helper()
	pad := strings.Repeat("x", size)
	text := func(i int) string { return fmt.Sprintf("%s-%d-%s", prefix, i, pad) }
	sent, got := first, first
	for got < first+n {
		for sent < first+n && sent-got < inflight {
			b, _ := json.Marshal(text(sent))
			a.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%s}}}`, sent+1, b))
			sent++
		}
		var resp struct {
			ID     int `json:"id"`
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		l := a.Recv()
		if err := json.Unmarshal([]byte(l), &resp); err != nil || len(resp.Result.Content) != 1 {
			a.t.Fatalf("call answered %.300s (%v)", l, err)
		}
		if resp.ID != got+1 || resp.Result.Content[0].Text != text(got) {
			a.t.Fatalf("call %d answered id %d with %.60q", got+1, resp.ID, resp.Result.Content[0].Text)
		}
		got++
	}
}

// fill writes a file on the filesystem of dir until it is full (ENOSPC),
// and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, free); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fallocate the filler: %v", err)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Bavail != 0 {
		t.Fatalf("the filesystem still has %d blocks free", st.Bavail)
	}
	return path
}

// status runs `hindsight status --json`.
func status(t *testing.T, home hindsight.Home) daemon.Status {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), "status", "--json")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	out, _ := cmd.Output() // exits 1 when the daemon is down; the JSON is there
	var st daemon.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v: %s", err, out)
	}
	return st
}

// daemonMetrics returns the daemon's GET /metrics.
func daemonMetrics(t *testing.T, home hindsight.Home) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", home.Socket())
	}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://hindsight/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// storedEchoes counts the echo steps the daemon stored per text prefix.
func storedEchoes(t *testing.T, c *daemon.Client) map[string]int {
	t.Helper()
	ctx := context.Background()
	tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
	if err != nil {
		return nil
	}
	n := map[string]int{}
	for _, task := range tasks {
		full, err := c.Task(ctx, task.ID)
		if err != nil {
			return nil
		}
		for _, s := range full.Steps {
			var args struct{ Text string }
			if s.Tool != "echo" || json.Unmarshal(s.Arguments, &args) != nil {
				continue
			}
			n[strings.SplitN(args.Text, "-", 2)[0]]++
		}
	}
	return n
}

func lossesOf(st daemon.Status, server string) losses.ServerLosses {
	for _, l := range st.Losses {
		if l.Server == server {
			return l
		}
	}
	return losses.ServerLosses{}
}

// TestDiskFull fills the home's filesystem under a running sidecar and its
// daemon, sends 1,500 calls of 4 KiB, frees the space and sends 300 more:
// every call is answered correctly, neither process dies, every step after
// the freeing is stored, and what was lost while the disk was full is in
// `hindsight status --json`, counted exactly (stored + lost = sent).
func TestDiskFull(t *testing.T) {
	const (
		fullCalls, afterCalls = 1500, 300
		maxHeld               = 2 << 20 // about 240 steps of 4 KiB: the rest of the full period is dropped
	)
	home := smallHome(t, 256<<20, maxHeld)
	a := wrapFake(t, home)
	a.initialize()
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()

	// Before: the daemon runs and stores steps.
	a.echoCalls("before", 0, 10, 4096, 1)
	testkit.WaitFor(t, "the steps before the fill to be stored", time.Minute, func() bool { return storedEchoes(t, c)["before"] == 10 })
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	daemonPID := h.PID

	filler := fill(t, string(home))
	a.echoCalls("full", 10, fullCalls, 4096, 16)
	if !a.alive() {
		t.Fatal("the sidecar died while the disk was full")
	}
	if testkit.ProcessGone(daemonPID) {
		t.Fatal("the daemon died while the disk was full")
	}
	// What could not be held is counted durably, while the disk is full.
	testkit.WaitFor(t, "the disk-full loss in status", time.Minute, func() bool {
		return lossesOf(status(t, home), "fake").Reasons[losses.DiskFull] > 0
	})

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	a.echoCalls("after", 10+fullCalls, afterCalls, 4096, 16)
	testkit.WaitFor(t, "every step after the freeing to be stored", time.Minute, func() bool { return storedEchoes(t, c)["after"] == afterCalls })
	if !a.alive() {
		t.Fatal("the sidecar died after the disk was freed")
	}
	h, err = c.Health(context.Background())
	if err != nil || h.PID != daemonPID {
		t.Fatalf("the daemon answering is %+v (%v), not the one from before the fill (pid %d)", h, err, daemonPID)
	}

	// Every call of the full period is stored or counted lost.
	var stored int
	var lost int64
	testkit.WaitFor(t, "the full period's steps to be stored or counted", time.Minute, func() bool {
		stored = storedEchoes(t, c)["full"]
		lost = lossesOf(status(t, home), "fake").Reasons[losses.DiskFull]
		return int64(stored)+lost == fullCalls
	})
	st := status(t, home)
	l := lossesOf(st, "fake")
	t.Logf("full period: %d of %d calls stored, %d lost (%+v)", stored, fullCalls, lost, l)
	if l.Lost != lost || l.LastReason != losses.DiskFull || l.LastAt.IsZero() {
		t.Errorf("status losses for fake = %+v, want %d lost, last reason %s with a time", l, lost, losses.DiskFull)
	}
	if stored == 0 {
		t.Error("no step of the full period was held and stored")
	}
	if !st.Running {
		t.Error("status says the daemon is not running")
	}
	metrics := daemonMetrics(t, home)
	for _, want := range []string{fmt.Sprintf(`hindsight_steps_lost{reason="disk-full",server="fake"} %d`, lost), "hindsight_daemon_disk_low 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the daemon's metrics lack %q", want)
		}
	}
	if !regexp.MustCompile(`hindsight_daemon_batches_refused_disk_full_total [1-9]`).MatchString(metrics) {
		t.Error("the daemon's metrics count no batch refused for lack of space")
	}

	// The sidecar exits cleanly when the agent leaves.
	a.CloseInput()
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("hindsight wrap exited with %v", err)
	}
	// The ledger outlives the sidecar.
	if got := lossesOf(status(t, home), "fake"); got.Lost != lost {
		t.Errorf("after the sidecar exited, status losses = %+v, want %d lost", got, lost)
	}
}

// TestDiskFullDaemonRestart kills the daemon while the disk is full: the
// sidecar's attempts to start a new one find no room (a daemon does not
// open its databases without its reserve, where Badger's first mapped
// write would fault) while the agent's calls go on; once space is freed a
// daemon starts, and every call is stored or counted lost.
func TestDiskFullDaemonRestart(t *testing.T) {
	const calls, maxHeld = 200, 1 << 20
	home := smallHome(t, 256<<20, maxHeld)
	a := wrapFake(t, home)
	a.initialize()
	c := daemon.NewClient(home.Socket())
	defer c.CloseIdle()
	a.echoCalls("before", 0, 5, 4096, 1)
	testkit.WaitFor(t, "the steps before the fill to be stored", time.Minute, func() bool { return storedEchoes(t, c)["before"] == 5 })
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	filler := fill(t, string(home))
	if err := syscall.Kill(h.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the daemon to die", time.Minute, func() bool { return testkit.ProcessGone(h.PID) })
	a.echoCalls("full", 5, calls, 4096, 8)
	if !a.alive() {
		t.Fatal("the sidecar died while the disk was full")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	a.echoCalls("after", 5+calls, 20, 4096, 1)
	testkit.WaitFor(t, "the steps after the freeing to be stored", time.Minute, func() bool { return storedEchoes(t, c)["after"] == 20 })
	testkit.WaitFor(t, "the full period's steps to be stored or counted", time.Minute, func() bool {
		return int64(storedEchoes(t, c)["full"])+lossesOf(status(t, home), "fake").Reasons[losses.DiskFull] == calls
	})
	if !a.alive() {
		t.Fatal("the sidecar died")
	}
	// The sidecar logs how each daemon it started ended when it gave up
	// waiting for it: a clean refusal, never a fault.
	if b, _ := os.ReadFile(home.Path("logs", "wrap-fake.log")); strings.Contains(string(b), "signal: bus error") {
		t.Error("a daemon started while the disk was full died of SIGBUS")
	}
}
