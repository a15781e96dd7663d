//go:build unix

package e2e

// Tests with real processes: the hindsight binary built from this module,
// its daemon on a real socket, real Badger on disk.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// proc is a hindsight process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
	err    error
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit.
func (p *proc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("%v still running after %v", p.cmd.Args, d)
		return nil
	}
}

// run starts `hindsight args…` with HINDSIGHT_HOME=home; the process is
// killed at the end of the test if it still runs.
func run(t *testing.T, home hindsight.Home, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	p := &proc{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// startDaemon runs `hindsight daemon` in home and waits until it answers.
func startDaemon(t *testing.T, home hindsight.Home) (*proc, *daemon.Client) {
	t.Helper()
	p := run(t, home, "daemon")
	c := daemon.NewClient(home.Socket())
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.Health(context.Background()); err == nil {
			return p, c
		}
		if p.exited() {
			t.Fatalf("daemon exited: %v\n%s\nlog:\n%s", p.err, p.stderr, daemonLog(home))
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon does not answer\nlog:\n%s", daemonLog(home))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func daemonLog(home hindsight.Home) string {
	b, _ := os.ReadFile(home.Path("logs", "daemon.log"))
	return string(b)
}

// stopHolder ends the daemon holding home's lock (one a sidecar or
// EnsureRunning started, detached from the test) at the end of the test.
func stopHolder(t *testing.T, home hindsight.Home) {
	testbin.StopDaemon(t, string(home))
}

func TestDaemonSingleInstanceAndSocketMode(t *testing.T) {
	home := hindsight.Home(testkit.ShortTempDir(t))
	testbin.Hindsight(t) // build before the race starts
	const n = 4
	procs := make([]*proc, n)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() { procs[i] = run(t, home, "daemon") })
	}
	wg.Wait()
	c := daemon.NewClient(home.Socket())
	testkit.WaitFor(t, "one daemon to answer", 10*time.Second, func() bool { _, err := c.Health(context.Background()); return err == nil })
	// The losers exit on their own, saying why; one stays.
	var alive []*proc
	for _, p := range procs {
		select {
		case <-p.done:
			if p.err == nil || !strings.Contains(p.stderr.String(), "another daemon is running") {
				t.Errorf("a second daemon exited with %v: %s", p.err, p.stderr)
			}
		case <-time.After(5 * time.Second):
			alive = append(alive, p)
		}
	}
	if len(alive) != 1 {
		t.Fatalf("%d daemons running, want 1", len(alive))
	}
	h, err := c.Health(context.Background())
	if err != nil || h.PID != alive[0].cmd.Process.Pid || daemon.LockHolder(home) != h.PID {
		t.Fatalf("health %+v, %v; lock holder %d; survivor %d", h, err, daemon.LockHolder(home), alive[0].cmd.Process.Pid)
	}

	fi, err := os.Lstat(home.Socket())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	for _, p := range []string{daemon.LockPath(home), home.DaemonData(), filepath.Join(home.DaemonData(), "traces")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is mode %v: readable by others", p, fi.Mode().Perm())
		}
	}
}

func TestDaemonStopsCleanlyAndKeepsTraces(t *testing.T) {
	ctx := context.Background()
	home := hindsight.Home(testkit.ShortTempDir(t))
	p, c := startDaemon(t, home)
	steps := []hindsight.Step{tasktest.Stdio(tasktest.Step("fs", 1, 0), "s1", 100), tasktest.Stdio(tasktest.Step("fs", 2, time.Second), "s1", 100)}
	if err := c.Deliver(ctx, steps); err != nil {
		t.Fatal(err)
	}

	// SIGTERM: a clean exit, the socket and the lock released.
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 15*time.Second); err != nil {
		t.Fatalf("daemon exit after SIGTERM: %v\n%s", err, p.stderr)
	}
	if _, err := os.Stat(home.Socket()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after a clean stop: %v", err)
	}
	if !strings.Contains(daemonLog(home), "daemon stopping") {
		t.Fatalf("no clean stop in the log:\n%s", daemonLog(home))
	}

	// Restart: the steps are there, redelivery is still deduplicated.
	p, c = startDaemon(t, home)
	tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
	if err != nil || len(tasks) != 1 || tasks[0].StepCount != 2 {
		t.Fatalf("after restart: %+v, %v", tasks, err)
	}
	if res, err := c.Ingest(ctx, steps); err != nil || res.Duplicates != 2 {
		t.Fatalf("redelivery after restart: %+v, %v", res, err)
	}
	// The same steps as the outbox stores them (encoded once): duplicates
	// too; one that does not decode is refused.
	var raws []json.RawMessage
	for i := range steps {
		b, err := json.Marshal(&steps[i])
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	if res, err := c.IngestRaw(ctx, raws); err != nil || res.Duplicates != 2 {
		t.Fatalf("raw redelivery: %+v, %v", res, err)
	}
	if _, err := c.IngestRaw(ctx, []json.RawMessage{json.RawMessage(`{"seq":"x"}`)}); !errors.Is(err, daemon.ErrRejected) {
		t.Fatalf("undecodable raw step: %v, want ErrRejected", err)
	}

	// SIGKILL leaves a stale socket behind; the next daemon replaces it.
	p.cmd.Process.Kill()
	p.wait(t, 10*time.Second)
	if _, err := os.Lstat(home.Socket()); err != nil {
		t.Fatalf("expected a stale socket after SIGKILL: %v", err)
	}
	_, c = startDaemon(t, home)
	if task, err := c.Task(ctx, tasks[0].ID); err != nil || len(task.Steps) != 2 {
		t.Fatalf("after SIGKILL and restart: %+v, %v", task, err)
	}
}

func TestEnsureRunningStartsOneDaemon(t *testing.T) {
	home := hindsight.Home(testkit.ShortTempDir(t))
	bin := testbin.Hindsight(t)
	stopHolder(t, home)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 5
	pids := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := daemon.EnsureRunning(ctx, home, bin)
			if err != nil {
				errs[i] = err
				return
			}
			h, err := c.Health(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			pids[i] = h.PID
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("EnsureRunning %d: %v", i, errs[i])
		}
		if pids[i] != pids[0] {
			t.Fatalf("callers reached different daemons: %v", pids)
		}
	}
	// Detached: its own session, not the test's process group.
	sid, err := getsid(pids[0])
	if err != nil || sid != pids[0] {
		t.Fatalf("daemon session id %d (%v), want its own pid %d", sid, err, pids[0])
	}
	// A second call finds it without starting another.
	if _, err := daemon.EnsureRunning(ctx, home, bin); err != nil || daemon.LockHolder(home) != pids[0] {
		t.Fatalf("EnsureRunning again: %v, holder %d", err, daemon.LockHolder(home))
	}
	// It runs on one processor, unless the environment says otherwise.
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	want := "GOMAXPROCS=1"
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		want = "GOMAXPROCS=" + v
	}
	if !slices.Contains(strings.Split(string(env), "\x00"), want) {
		t.Errorf("daemon environment lacks %s: %q", want, env)
	}
}

func getsid(pid int) (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}

func TestDaemonIdleGapFromConfig(t *testing.T) {
	ctx := context.Background()
	home := hindsight.Home(testkit.ShortTempDir(t))
	if err := home.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(home.Path("config.yaml"), []byte("daemon:\n  idle_gap: 1s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, c := startDaemon(t, home)
	now := time.Now()
	s := tasktest.Stdio(tasktest.Step("fs", 1, 0), "s1", 100)
	s.StartedAt, s.EndedAt = now, now.Add(time.Millisecond)
	if err := c.Deliver(ctx, []hindsight.Step{s}); err != nil {
		t.Fatal(err)
	}
	// No session closes: only the idle gap makes the task final.
	testkit.WaitFor(t, "one final task", 10*time.Second, func() bool {
		tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
		return err == nil && len(tasks) == 1 && tasks[0].Final
	})
	if !strings.Contains(daemonLog(home), `"idle_gap":"1s"`) {
		t.Fatalf("daemon did not log the configured gap:\n%s", daemonLog(home))
	}
}

// TestDaemonEndsWithItsHome: a daemon whose home is deleted (a test's
// TempDir removed) shuts down by itself, and a SIGTERM ends one whose home
// is gone even with unflushed data, which Badger cannot write any more.
func TestDaemonEndsWithItsHome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sigterm bool
	}{
		{"unattended", false},
		{"sigterm", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testkit.ShortTempDir(t)
			home := hindsight.Home(filepath.Join(dir, "home"))
			p, c := startDaemon(t, home)
			steps := make([]hindsight.Step, 0, 50)
			for i := range 50 {
				steps = append(steps, tasktest.Stdio(tasktest.Step("gone", uint64(i+1), time.Duration(i)*time.Second), "s1", 100))
			}
			if err := c.Deliver(context.Background(), steps); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(string(home)); err != nil {
				t.Fatal(err)
			}
			if tc.sigterm {
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			// The watch looks every 2 s; Badger's close is bounded.
			if err := p.wait(t, 20*time.Second); err != nil {
				t.Fatalf("daemon exit: %v\n%s", err, p.stderr)
			}
		})
	}
}

// TestDaemonEndsWhenItsSocketIsReplaced: another daemon's socket at the
// same path (its home recreated) makes the old daemon leave.
func TestDaemonEndsWhenItsSocketIsReplaced(t *testing.T) {
	home := hindsight.Home(testkit.ShortTempDir(t))
	p, _ := startDaemon(t, home)
	if err := os.Remove(home.Socket()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(home.Socket(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Fatalf("daemon exit: %v\n%s", err, p.stderr)
	}
	if _, err := os.Stat(home.Socket()); err != nil {
		t.Fatalf("the daemon removed a socket file that is not its own: %v", err)
	}
}
