//go:build unix

package e2e

// End-to-end tests of the sidecar and the daemon together: a real MCP client
// (the official Go SDK) talks to mcp-server-everything through a real
// `hindsight wrap`, which records into its outbox and delivers to a real
// daemon.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sidecarHome is a fresh home whose configuration switches injection off:
// these tests count recorded steps, and injection is not what they test.
func sidecarHome(t *testing.T) hindsight.Home {
	t.Helper()
	home := hindsight.Home(testkit.ShortTempDir(t))
	if err := home.Ensure(); err != nil {
		t.Fatal(err)
	}
	cfg := "inject:\n  instructions: false\n  error_results: false\n  query_tool: false\n"
	if err := os.WriteFile(home.Path("config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	stopHolder(t, home)
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"wrap-everything.log", "daemon.log"} {
				b, _ := os.ReadFile(home.Path("logs", name))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("%s:\n%s", name, b)
			}
		}
	})
	return home
}

// wrapEverything connects a real MCP client to mcp-server-everything behind
// `hindsight wrap`, and returns the session and the sidecar's command.
func wrapEverything(t *testing.T, home hindsight.Home) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	everything := testbin.NPM(t, "mcp-server-everything")
	cmd := exec.Command(testbin.Hindsight(t), "wrap", "--name", "everything", "--grace", "2s", "--", everything, "stdio")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	client := mcp.NewClient(&mcp.Implementation{Name: "daemon-test", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through wrap: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

// echoCall is one echo call as the client saw it.
type echoCall struct {
	msg            string
	sent, returned time.Time
}

// echo calls the echo tool with msg.
func echo(ctx context.Context, cs *mcp.ClientSession, msg string) (echoCall, error) {
	c := echoCall{msg: msg, sent: time.Now()}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	c.returned = time.Now()
	if err == nil && res.IsError {
		err = fmt.Errorf("echo %s: isError", msg)
	}
	return c, err
}

// echoSteps returns the recorded echo calls of home's daemon, by message,
// in step order per task.
func echoSteps(t *testing.T, c *daemon.Client) (order []string, byMsg map[string][]hindsight.Step) {
	t.Helper()
	ctx := context.Background()
	tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
	if err != nil {
		return nil, nil
	}
	byMsg = map[string][]hindsight.Step{}
	for i := len(tasks) - 1; i >= 0; i-- {
		task, err := c.Task(ctx, tasks[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		for j, s := range task.Steps {
			if s.StepIndex != j {
				t.Fatalf("task %s: step %d has index %d", task.ID, j, s.StepIndex)
			}
			if s.Method != "tools/call" || s.Tool != "echo" {
				continue
			}
			var args struct{ Message string }
			if err := json.Unmarshal(s.Arguments, &args); err != nil {
				t.Fatalf("step arguments %s: %v", s.Arguments, err)
			}
			order = append(order, args.Message)
			byMsg[args.Message] = append(byMsg[args.Message], s)
		}
	}
	return order, byMsg
}

func TestSidecarStartsDaemonAndEndsTask(t *testing.T) {
	home := sidecarHome(t)
	cs, _ := wrapEverything(t, home)
	ctx := context.Background()
	for i := range 3 {
		if _, err := echo(ctx, cs, fmt.Sprintf("m-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The sidecar started the daemon on its own, detached.
	c := daemon.NewClient(home.Socket())
	testkit.WaitFor(t, "the daemon to answer", 10*time.Second, func() bool { _, err := c.Health(ctx); return err == nil })
	testkit.WaitFor(t, "three echo steps", 10*time.Second, func() bool { order, _ := echoSteps(t, c); return len(order) == 3 })

	// The agent goes away: the sidecar drains and says the session ended,
	// and the task is final.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	testkit.WaitFor(t, "one final task", 10*time.Second, func() bool {
		tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
		return err == nil && len(tasks) == 1 && tasks[0].Final
	})
	task, _ := c.Tasks(ctx, daemon.TaskFilter{})
	full, _ := c.Task(ctx, task[0].ID)
	methods := map[string]bool{}
	for _, s := range full.Steps {
		methods[s.Method] = true
		if s.HostPID != os.Getpid() || s.Server != "everything" || s.Transport != "stdio" {
			t.Fatalf("step %d: host %d server %q transport %q", s.StepIndex, s.HostPID, s.Server, s.Transport)
		}
	}
	if !methods["initialize"] || !methods["tools/call"] {
		t.Fatalf("task methods %v, want initialize and tools/call", methods)
	}
	// The outbox was emptied and removed.
	if obs := spool.List(home); len(obs) != 0 {
		t.Fatalf("outboxes left: %+v", obs)
	}
}

// traffic calls echo every 10 ms until stop is closed or a call fails.
func traffic(ctx context.Context, cs *mcp.ClientSession, stop <-chan struct{}) (calls []echoCall, err error) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return calls, nil
		case <-time.After(10 * time.Millisecond):
		}
		c, err := echo(ctx, cs, fmt.Sprintf("m-%04d", i))
		if err != nil {
			return calls, err
		}
		calls = append(calls, c)
	}
}

func TestOutageEveryStepOnceInOrder(t *testing.T) {
	ctx := context.Background()
	home := sidecarHome(t)
	c := startDaemonDetached(t, home)
	cs, _ := wrapEverything(t, home)

	stop := make(chan struct{})
	var calls []echoCall
	var trafficErr error
	var wg sync.WaitGroup
	wg.Go(func() { calls, trafficErr = traffic(ctx, cs, stop) })

	time.Sleep(time.Second)
	// The daemon dies hard, and cannot come back while the test holds its
	// lock (the sidecar tries to restart it).
	lock := seizeLock(t, home)
	outageStart := time.Now()
	time.Sleep(2 * time.Second)
	lock.Release()
	if _, err := daemon.EnsureRunning(ctx, home, testbin.Hindsight(t)); err != nil {
		t.Fatal(err)
	}
	outageEnd := time.Now()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if trafficErr != nil {
		t.Fatalf("the relay failed during the outage: %v", trafficErr)
	}
	during := 0
	for _, call := range calls {
		if call.sent.After(outageStart) && call.returned.Before(outageEnd) {
			during++
		}
	}
	if during < 20 {
		t.Fatalf("only %d calls during the outage; the test shows nothing", during)
	}

	testkit.WaitFor(t, "every call's step", 10*time.Second, func() bool { order, _ := echoSteps(t, c); return len(order) >= len(calls) })
	order, byMsg := echoSteps(t, c)
	if len(order) != len(calls) {
		t.Fatalf("%d echo steps recorded, %d calls made", len(order), len(calls))
	}
	for i, call := range calls {
		if order[i] != call.msg {
			t.Fatalf("step %d is %s, want %s (order lost)", i, order[i], call.msg)
		}
		steps := byMsg[call.msg]
		if len(steps) != 1 {
			t.Fatalf("%s recorded %d times", call.msg, len(steps))
		}
		// Original timestamps: taken when the sidecar relayed the call,
		// not when the step reached the daemon.
		s := steps[0]
		if s.StartedAt.Before(call.sent) || s.EndedAt.After(call.returned) || s.EndedAt.Before(s.StartedAt) {
			t.Fatalf("%s: step %v–%v outside the call %v–%v", call.msg, s.StartedAt, s.EndedAt, call.sent, call.returned)
		}
	}
	t.Logf("%d calls, %d during a %v outage, all recorded once, in order", len(calls), during, outageEnd.Sub(outageStart).Round(time.Millisecond))
}

func TestSidecarKilledStepsSurvive(t *testing.T) {
	ctx := context.Background()
	home := sidecarHome(t)
	// No daemon while the sidecar runs (the test holds the lock): every
	// step is only in the sidecar's outbox when it is killed.
	lock, err := daemon.AcquireLock(home)
	if err != nil {
		t.Fatal(err)
	}
	cs, cmd := wrapEverything(t, home)
	stop := make(chan struct{})
	var calls []echoCall
	var wg sync.WaitGroup
	wg.Go(func() { calls, _ = traffic(ctx, cs, stop) })
	time.Sleep(1500 * time.Millisecond)
	kill := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	close(stop)
	wg.Wait()
	var must []echoCall
	for _, c := range calls {
		if c.returned.Before(kill.Add(-50 * time.Millisecond)) {
			must = append(must, c)
		}
	}
	if len(must) < 20 {
		t.Fatalf("only %d calls before the kill; the test shows nothing", len(must))
	}
	// The kernel drops the dead sidecar's lock as it reaps the process.
	deadline := time.Now().Add(10 * time.Second)
	for obs := spool.List(home); len(obs) != 1 || obs[0].Live; obs = spool.List(home) {
		if time.Now().After(deadline) {
			t.Fatalf("outbox still locked: %+v; holders: %v", obs, holders(t, home.Outboxes()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if obs := spool.List(home); len(obs) != 1 || obs[0].Live || obs[0].Stats == nil || obs[0].Stats.Server != "everything" {
		t.Fatalf("want one orphaned outbox with its sidecar's stats, got %+v", obs)
	}

	// The daemon comes; its orphan drain delivers the dead sidecar's steps.
	lock.Release()
	c, err := daemon.EnsureRunning(ctx, home, testbin.Hindsight(t))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the steps of every call returned before the kill", 10*time.Second, func() bool { order, _ := echoSteps(t, c); return len(order) >= len(must) })
	order, byMsg := echoSteps(t, c)
	for i, call := range must {
		if order[i] != call.msg || len(byMsg[call.msg]) != 1 {
			t.Fatalf("step %d: %s recorded %d times at this place (got %s)", i, call.msg, len(byMsg[call.msg]), order[i])
		}
	}
	testkit.WaitFor(t, "the outbox to be emptied and removed", 10*time.Second, func() bool { return len(spool.List(home)) == 0 })
	t.Logf("%d calls made, %d returned >50ms before SIGKILL, %d recorded", len(calls), len(must), len(order))
}

// startDaemonDetached starts the daemon as a sidecar would, so that its
// pid is the lock holder's and stopHolder ends it.
func startDaemonDetached(t *testing.T, home hindsight.Home) *daemon.Client {
	t.Helper()
	c, err := daemon.EnsureRunning(context.Background(), home, testbin.Hindsight(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// seizeLock kills the daemon of home with SIGKILL and takes its lock, so
// that no daemon can start until the test releases it. (A sidecar may
// restart a daemon between the kill and the lock: it is killed too.)
func seizeLock(t *testing.T, home hindsight.Home) *daemon.Lock {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid := daemon.LockHolder(home); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		l, err := daemon.AcquireLock(home)
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock not free: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holders lists the processes with a file under dir open.
func holders(t *testing.T, dir string) []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			target, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if strings.HasPrefix(target, dir) {
				cmd, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
				out = append(out, p.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " ")+" "+target)
			}
		}
	}
	return out
}

// TestSidecarCaptureOff: with HINDSIGHT_CAPTURE=off, or capture.enabled:
// false in the configuration, a sidecar relays and injects but records
// nothing and opens no outbox. HINDSIGHT_CAPTURE=on wins over the file.
func TestSidecarCaptureOff(t *testing.T) {
	for _, tc := range []struct {
		name, config, env string
		record            bool
	}{
		{"env", "", "HINDSIGHT_CAPTURE=off", false},
		{"config", "capture:\n  enabled: false\n", "", false},
		{"env-overrides-config", "capture:\n  enabled: false\n", "HINDSIGHT_CAPTURE=on", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			home := hindsight.Home(testkit.ShortTempDir(t))
			testbin.StopDaemon(t, string(home))
			if err := home.Ensure(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(home.Path("config.yaml"), []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			c := startDaemonDetached(t, home)
			everything := testbin.NPM(t, "mcp-server-everything")
			cmd := exec.Command(testbin.Hindsight(t), "wrap", "--name", "everything", "--", everything, "stdio")
			cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home), tc.env)
			client := mcp.NewClient(&mcp.Implementation{Name: "daemon-test", Version: "1.0"}, nil)
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect through wrap: %v", err)
			}
			// Relayed, and injected: query_hindsight is offered.
			tools, err := cs.ListTools(cctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var query bool
			for _, tool := range tools.Tools {
				query = query || tool.Name == "query_hindsight"
			}
			if !query {
				t.Error("query_hindsight missing: injection is off too")
			}
			if _, err := echo(cctx, cs, "unrecorded"); err != nil {
				t.Fatal(err)
			}
			if err := cs.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			cmd.Wait() // the sidecar drained what it had and exited

			tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if recorded := len(tasks) > 0; recorded != tc.record {
				t.Fatalf("recorded = %v (%d tasks), want %v", recorded, len(tasks), tc.record)
			}
			if !tc.record {
				if ents, err := os.ReadDir(home.Outboxes()); err == nil && len(ents) > 0 {
					t.Fatalf("an outbox was opened: %v", ents)
				}
			}
		})
	}
}
