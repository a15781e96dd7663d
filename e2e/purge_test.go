//go:build unix

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// leaked is a secret the redactor cannot recognise (a random value under an
// innocent key): the case purge exists for.
const leaked = "zq7-leaked-Kp4vN9xW2mQ8"

// filesHolding returns the files under root whose bytes contain s.
func filesHolding(t *testing.T, root, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSocket != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil // a file Badger removed meanwhile
		}
		if bytes.Contains(b, []byte(s)) {
			rel, _ := filepath.Rel(root, p)
			hits = append(hits, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestPurgeErasesFromDisk plants a secret that escaped redaction in a
// trace (in a small step and in one large enough for Badger's value log)
// and in an experience of a real daemon, purges both with the CLI, and
// finds the secret in no file under the home (Badger's tables, value logs
// and memtable logs included) when the purges return, without a restart;
// the daemon still serves, and the other task (whose id extends a purged
// one's) and experience are intact.
func TestPurgeErasesFromDisk(t *testing.T) {
	home := hindsight.Home(testkit.ShortTempDir(t))
	testbin.StopDaemon(t, string(home))
	ctx := context.Background()
	daemon, c := startDaemon(t, home)
	var steps []hindsight.Step
	for i, task := range []string{"leaky-task", "leaky-task-2", "leaky-task-clean"} {
		s := tasktest.Explicit(tasktest.Stdio(tasktest.Step("src", uint64(i+1), time.Duration(i)*time.Second), "s1", 100), task)
		s.Arguments = json.RawMessage(`{"path":"/data/x","note":"` + leaked + `"}`)
		if task == "leaky-task-clean" {
			s.Arguments = json.RawMessage(`{"path":"/data/y"}`)
		}
		steps = append(steps, s)
	}
	// A step above the trace store's value threshold: its value goes to
	// the value log.
	big := tasktest.Explicit(tasktest.Stdio(tasktest.Step("src", 4, 4*time.Second), "s1", 100), "leaky-task")
	big.Result = json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("row of data ", 2000) + leaked + `"}]}`)
	steps = append(steps, big)
	if err := c.Deliver(ctx, steps); err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(testkit.ShortTempDir(t), "pack.jsonl")
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// A long lesson: a record above Badger's default value threshold.
	lines := tasktest.ExperienceLine("leaky", "read_file", "Pass note="+leaked+" to read_file."+strings.Repeat(" Then check the result.", 100), day) +
		tasktest.ExperienceLine("clean", "read_file", "Call read_file with an absolute path under /data.", day) +
		// Learnt from a leaky task: `traces purge --with-experiences` takes it.
		strings.Replace(tasktest.ExperienceLine("derived", "read_file", "Send note "+leaked+" along.", day),
			`"source_task":"t-1"`, `"source_task":"leaky-task"`, 1)
	if err := os.WriteFile(pack, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	testbin.Run(t, string(home), false, "experiences", "import", pack)
	if hits := filesHolding(t, string(home), leaked); len(hits) == 0 {
		t.Fatal("the planted secret is on no file before the purge: the test proves nothing")
	}

	t0 := time.Now()
	out := testbin.Run(t, string(home), false, "traces", "purge", "leaky-task", "leaky-task-2", "no-such-task", "--with-experiences")
	t.Logf("traces purge took %v", time.Since(t0).Round(time.Millisecond))
	if !strings.Contains(out, "purged 2 task(s)") || !strings.Contains(out, "purged 1 experience(s) learnt from them: derived") ||
		strings.Contains(out, "next starts") {
		t.Errorf("traces purge said %q", out)
	}
	out = testbin.Run(t, string(home), false, "experiences", "purge", "leaky")
	if !strings.Contains(out, "purged 1 experience(s)") {
		t.Errorf("experiences purge said %q", out)
	}
	// When the purges return, it is in no file, the value-log file the
	// trace store was appending to included, and the daemon still runs.
	if hits := filesHolding(t, string(home), leaked); len(hits) > 0 {
		t.Errorf("the secret is still on disk after the purge, in %v", hits)
	}
	if daemon.exited() {
		t.Fatalf("the daemon stopped: %v\n%s", daemon.err, daemon.stderr)
	}
	if _, err := c.Task(ctx, "leaky-task"); err == nil {
		t.Error("a purged task is still listed")
	}
	if task, err := c.Task(ctx, "leaky-task-clean"); err != nil || len(task.Steps) != 1 {
		t.Errorf("the clean task after the purge: %+v, %v", task, err)
	}
	if e, err := c.Experience(ctx, "", "clean"); err != nil || e.Lesson == "" {
		t.Errorf("the clean experience after the purge: %+v, %v", e, err)
	}
	// The daemon keeps working: a new step of the purged source is taken.
	s := tasktest.Explicit(tasktest.Stdio(tasktest.Step("src", 9, 9*time.Second), "s1", 100), "after-purge")
	if err := c.Deliver(ctx, []hindsight.Step{s}); err != nil {
		t.Errorf("deliver after purge: %v", err)
	}
	if _, err := c.Task(ctx, "after-purge"); err != nil {
		t.Errorf("a task after the purge: %v", err)
	}
}

// TestPurgeReachesRunningSidecar: calls recorded by a running `wrap`
// sidecar and delivered to its daemon are erased by a purge from every
// file under the home, the sidecar's outbox journal segments included,
// without a restart and while the agent keeps calling; the sidecar relays
// and records on. (That a delivered step leaves the journal at once, not
// when its segment empties, is shown deterministically by
// spool.TestMappedJournalClears: here the segment often empties first.)
func TestPurgeReachesRunningSidecar(t *testing.T) {
	ctx := context.Background()
	home := sidecarHome(t)
	c := startDaemonDetached(t, home)
	cs, cmd := wrapEverything(t, home)
	const planted = 5
	for i := range planted {
		if _, err := echo(ctx, cs, fmt.Sprintf("%s-%d", leaked, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Calls keep coming, from four callers each pausing 5 ms between
	// calls, from before the planted steps are delivered to the end of the
	// test.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var clean atomic.Int64
	var callErr atomic.Value
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				if _, err := echo(ctx, cs, fmt.Sprintf("clean-%d-%d", g, i)); err != nil {
					callErr.Store(err)
					return
				}
				clean.Add(1)
			}
		})
	}
	stopCalls := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopCalls()

	// The task holding the planted steps, once the daemon has them all.
	var task string
	testkit.WaitFor(t, "the planted steps in the daemon", 10*time.Second, func() bool {
		tasks, err := c.Tasks(ctx, daemon.TaskFilter{})
		if err != nil {
			return false
		}
		for _, tk := range tasks {
			full, err := c.Task(ctx, tk.ID)
			if err != nil {
				continue
			}
			n := 0
			for _, s := range full.Steps {
				if bytes.Contains(s.Arguments, []byte(leaked)) {
					n++
				}
			}
			if n == planted {
				task = tk.ID
				return true
			}
		}
		return false
	})
	segments, _ := filepath.Glob(filepath.Join(home.Outboxes(), "*", "journal-*.bin"))
	if len(segments) == 0 {
		t.Fatal("the sidecar has no journal segment: the search below would not cover one")
	}
	out := testbin.Run(t, string(home), false, "traces", "purge", task)
	if !strings.Contains(out, "purged 1 task(s)") {
		t.Errorf("traces purge said %q", out)
	}
	if hits := filesHolding(t, string(home), leaked); len(hits) > 0 {
		t.Errorf("the purged value is still on disk, in %v", hits)
	}
	stopCalls()
	if err, _ := callErr.Load().(error); err != nil {
		t.Fatalf("a call failed: %v", err)
	}
	if cmd.ProcessState != nil {
		t.Fatalf("the sidecar exited: %v", cmd.ProcessState)
	}
	if _, err := echo(ctx, cs, "after-purge"); err != nil {
		t.Fatalf("a call after the purge: %v", err)
	}
	t.Logf("%d clean calls", clean.Load())
}
