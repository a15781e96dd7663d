//go:build unix

package e2e

// Small answers made honest, each shown with the real programs.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestSearchBrowsingCountsNoHit: `experiences search` shows lessons
// without counting hits on them (browsing changes no ranking); --hit
// counts, and --no-hit is still accepted. `experiences list` marks a
// pinned lesson.
func TestSearchBrowsingCountsNoHit(t *testing.T) {
	e := newEnv(t)
	e.seed(t, hindsight.Experience{ID: "browse-1", Tool: "fetch_report", Lesson: "Call login before fetch_report; it fails with 401 otherwise."})
	hits := func() int {
		t.Helper()
		x, err := e.client.Experience(context.Background(), "", "browse-1")
		if err != nil {
			t.Fatal(err)
		}
		return x.HitCount
	}
	for _, args := range [][]string{{"fetch_report", "login"}, {"--no-hit", "fetch_report"}, {"--json", "login"}} {
		out := runCLI(t, e.exe, string(e.home), append([]string{"experiences", "search"}, args...)...)
		if !strings.Contains(out, "browse-1") {
			t.Fatalf("search %v does not show the lesson:\n%s", args, out)
		}
	}
	if n := hits(); n != 0 {
		t.Errorf("after three searches: hit_count %d, want 0", n)
	}
	runCLI(t, e.exe, string(e.home), "experiences", "search", "--hit", "fetch_report")
	if n := hits(); n != 1 {
		t.Errorf("after a search with --hit: hit_count %d, want 1", n)
	}

	if out := runCLI(t, e.exe, string(e.home), "experiences", "list"); !strings.Contains(out, " active ") || strings.Contains(out, "pinned") {
		t.Errorf("an unpinned lesson's state:\n%s", out)
	}
	runCLI(t, e.exe, string(e.home), "experiences", "pin", "browse-1")
	if out := runCLI(t, e.exe, string(e.home), "experiences", "list"); !strings.Contains(out, " pinned ") {
		t.Errorf("a pinned lesson is not marked:\n%s", out)
	}
}

// TestCommandWaitsForStoppingDaemon: a command run while a daemon stops
// (it holds the lock and no longer answers; here the test holds the lock)
// starts a daemon that loses the lock, waits for the lock to be let go,
// then starts one that answers, and succeeds.
func TestCommandWaitsForStoppingDaemon(t *testing.T) {
	skipShort(t)
	testbin.Hindsight(t)
	home := hindsight.Home(testbin.Home(t))
	lock, err := daemon.AcquireLock(home)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	cli := run(t, home, "experiences", "list", "--json")
	// The daemon the command started found the lock taken.
	testkit.WaitFor(t, "the command's daemon to lose the lock", 30*time.Second, func() bool {
		b, _ := os.ReadFile(home.Path("logs", "daemon-start.err"))
		return strings.Contains(string(b), daemon.ErrAlreadyRunning.Error()) || cli.exited()
	})
	if cli.exited() {
		t.Fatalf("the command ended while the lock was held: %v\n%s", cli.err, cli.stderr)
	}
	lock.Release()
	if err := cli.wait(t, time.Minute); err != nil {
		t.Fatalf("command run while a daemon stopped: %v\n%s", err, cli.stderr)
	}
	if _, err := daemon.NewClient(home.Socket()).Health(context.Background()); err != nil {
		t.Errorf("no daemon answers after the command: %v", err)
	}
}

// blockedHome is a home where no daemon can start: its socket path is a
// directory (unblock removes it).
func blockedHome(t *testing.T) (home hindsight.Home, unblock func()) {
	t.Helper()
	home = hindsight.Home(testbin.Home(t))
	if err := os.MkdirAll(filepath.Join(home.Socket(), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	return home, func() {
		if err := os.RemoveAll(home.Socket()); err != nil {
			t.Fatal(err)
		}
	}
}

// sessionThenClose runs `hindsight wrap` in front of the example server
// in home, with env, sends calls (each a tools/call's params) after the
// handshake and tools/list, closes its stdin, and returns the answers to
// the calls and how long the sidecar took to exit after its stdin closed.
func sessionThenClose(t *testing.T, home hindsight.Home, env []string, calls ...string) ([]string, time.Duration) {
	t.Helper()
	exe := testbin.Hindsight(t)
	cmd := exec.Command(exe, "wrap", "--name", "example", "--", exe, "example-server")
	cmd.Env = append(append(os.Environ(), "HINDSIGHT_HOME="+string(home)), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, out := testkit.StartPiped(t, cmd)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}
	for i, c := range calls {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, 10+i, c))
	}
	r := bufio.NewReader(out)
	began := time.Now()
	var answers []string
	for _, l := range lines {
		if _, err := io.WriteString(in, l+"\n"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(l, `"id"`) {
			continue
		}
		for {
			b, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("read answer to %s: %v\n%s", l, err, stderr.String())
			}
			if !bytes.Contains(b, []byte(`"method"`)) {
				if strings.Contains(l, "tools/call") {
					answers = append(answers, string(b))
				}
				break
			}
		}
	}
	t.Logf("the session took %v", time.Since(began).Round(time.Millisecond))
	start := time.Now()
	in.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sidecar: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("sidecar still running a minute after its client closed\n%s", stderr.String())
	}
	return answers, time.Since(start)
}

// outboxEnds returns the ends noted in home's outboxes.
func outboxEnds(t *testing.T, home hindsight.Home) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(home.Outboxes(), "*", "ends.jsonl"))
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return string(all)
}

// waitFinal waits until the daemon holds task id final, with n steps or
// more (the handshake's are recorded too).
func waitFinal(t *testing.T, c *daemon.Client, id string, n int) {
	t.Helper()
	var last *hindsight.Task
	testkit.WaitFor(t, "task "+id+" final", 90*time.Second, func() bool {
		task, err := c.Task(context.Background(), id)
		if err == nil {
			last = task
		}
		return err == nil && task.Final && task.StepCount >= n
	})
	if last == nil || !last.Final {
		t.Fatalf("task %s: %+v", id, last)
	}
}

// TestTriggerWithDaemonDown: with no daemon able to start, trigger_hindsight
// answers the agent with an error saying so (not that lessons are being
// learned), the sidecar exits without waiting out the end's retries, and
// the end waits in its outbox; a daemon started later drains the outbox
// and the task is final at once (not after the idle gap).
func TestTriggerWithDaemonDown(t *testing.T) {
	skipShort(t)
	home, unblock := blockedHome(t)
	const task = "e2e-trigger-down"
	start := time.Now()
	answers, took := sessionThenClose(t, home, []string{"HINDSIGHT_TASK_ID=" + task},
		`{"name":"login","arguments":{"user":"u","password":"p"}}`,
		`{"name":"trigger_hindsight","arguments":{}}`)
	t.Logf("the sidecar exited %v after its client closed", took.Round(time.Millisecond))
	if len(answers) != 2 {
		t.Fatalf("answers: %q", answers)
	}
	if a := answers[1]; !strings.Contains(a, `"isError":true`) || strings.Contains(a, "Task ended") || !strings.Contains(a, "unavailable") {
		t.Errorf("trigger_hindsight with the daemon down answered %s", a)
	}
	// endTaskTimeout (30 s) is what it waited before.
	if took >= 30*time.Second {
		t.Errorf("the sidecar lingered %v after its client closed", took)
	}
	if ends := outboxEnds(t, home); !strings.Contains(ends, `"final":true`) || !strings.Contains(ends, task) {
		t.Fatalf("the task's end is not in the outbox: %q", ends)
	}

	unblock()
	start = time.Now()
	_, c := startDaemon(t, home)
	waitFinal(t, c, task, 2)
	t.Logf("task final %v after the daemon started", time.Since(start).Round(time.Millisecond))
	testkit.WaitFor(t, "the outbox drained and removed", 30*time.Second, func() bool {
		dirs, _ := filepath.Glob(filepath.Join(home.Outboxes(), "[0-9]*"))
		return len(dirs) == 0
	})
}

// TestSessionEndSurvivesLateDaemon: a session that ends before the daemon
// is up (here it cannot start until the test lets it) leaves its end in
// the outbox with its steps; the daemon that drains the outbox as a dead
// sidecar's closes the session, and its task is final at once, not after
// the 10-minute idle gap.
func TestSessionEndSurvivesLateDaemon(t *testing.T) {
	skipShort(t)
	home, unblock := blockedHome(t)
	sessionThenClose(t, home, nil,
		`{"name":"login","arguments":{"user":"u","password":"p"}}`,
		`{"name":"fetch_report","arguments":{"month":"2026-03"}}`,
		`{"name":"fetch_report","arguments":{"month":"2026-04"}}`)
	if ends := outboxEnds(t, home); !strings.Contains(ends, `"session_id"`) || strings.Contains(ends, `"final"`) {
		t.Fatalf("the session's end is not in the outbox: %q", ends)
	}
	unblock()
	_, c := startDaemon(t, home)
	var id string
	testkit.WaitFor(t, "the session's task", 60*time.Second, func() bool {
		tasks, err := c.Tasks(context.Background(), daemon.TaskFilter{})
		if err == nil && len(tasks) == 1 {
			id = tasks[0].ID
		}
		return id != ""
	})
	waitFinal(t, c, id, 3)
	testkit.WaitFor(t, "the outbox drained and removed", 30*time.Second, func() bool {
		dirs, _ := filepath.Glob(filepath.Join(home.Outboxes(), "[0-9]*"))
		return len(dirs) == 0
	})
}

// TestEpisodesAndImportsFinal: the episodes a `hindsight mcp` client
// stored are final (and reflected on) once the client goes, and an
// imported task of episodes (steps without a session) is final at once:
// neither waits for the idle gap, nor for a daemon restart.
func TestEpisodesAndImportsFinal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const task = "e2e-episodes"
	cmd := exec.Command(e.exe, "mcp")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(e.home))
	in, out := testkit.StartPiped(t, cmd)
	r := bufio.NewReader(out)
	for i, l := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"store_episode","arguments":{"task_id":"` + task + `","action":"bash","input":{"cmd":"cat notes.txt"},"observation":"cat: notes.txt: No such file or directory","failed":true}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"store_episode","arguments":{"task_id":"` + task + `","action":"bash","input":{"cmd":"ls"},"observation":"notes.md"}}}`,
	} {
		if _, err := io.WriteString(in, l+"\n"); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			continue
		}
		b, err := r.ReadBytes('\n')
		if err != nil || (i > 1 && !bytes.Contains(b, []byte(`"step_index"`))) {
			t.Fatalf("answer to %s: %s %v", l, b, err)
		}
	}
	if task, err := e.client.Task(ctx, task); err != nil || task.Final {
		t.Fatalf("while its client is there: %+v %v", task, err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hindsight mcp: %v", err)
	}
	got, err := e.client.Task(ctx, task)
	if err != nil || !got.Final {
		t.Fatalf("episodes' task after its client went: %+v %v", got, err)
	}
	testkit.WaitFor(t, "the episodes' task reflected", 60*time.Second, func() bool {
		got, err := e.client.Task(ctx, task)
		return err == nil && got.Reflection == "done"
	})

	// The same task, exported and imported into another daemon.
	export := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(export, []byte(runCLI(t, e.exe, string(e.home), "traces", "export", task)), 0o600); err != nil {
		t.Fatal(err)
	}
	other, oc := daemonHome(t, e.exe, 30*time.Second)
	runCLI(t, e.exe, string(other), "traces", "import", export)
	got, err = oc.Task(ctx, task)
	if err != nil || !got.Final || got.StepCount != 2 {
		t.Fatalf("imported task of episodes: %+v %v", got, err)
	}
	testkit.WaitFor(t, "the imported task reflected", 60*time.Second, func() bool {
		got, err := oc.Task(ctx, task)
		return err == nil && got.Reflection == "done"
	})
}
