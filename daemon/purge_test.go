package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/testbin"
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
// trace and in an experience of a real daemon, purges both with the CLI,
// and finds the secret in no file under the home (Badger's tables, value
// logs and memtable logs included), while the other task (whose id
// extends a purged one's) and experience are intact.
func TestPurgeErasesFromDisk(t *testing.T) {
	home := hindsight.Home(shortTempDir(t))
	testbin.StopDaemon(t, string(home))
	ctx := context.Background()
	c, err := EnsureRunning(ctx, home, testbin.Hindsight(t))
	if err != nil {
		t.Fatal(err)
	}
	var steps []hindsight.Step
	for i, task := range []string{"leaky-task", "leaky-task-2", "leaky-task-clean"} {
		s := explicit(stdio(step("src", uint64(i+1), time.Duration(i)*time.Second), "s1", 100), task)
		s.Arguments = json.RawMessage(`{"path":"/data/x","note":"` + leaked + `"}`)
		if task == "leaky-task-clean" {
			s.Arguments = json.RawMessage(`{"path":"/data/y"}`)
		}
		steps = append(steps, s)
	}
	if err := c.Deliver(ctx, steps); err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(shortTempDir(t), "pack.jsonl")
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// A long lesson: a record above Badger's default value threshold.
	lines := experienceLine("leaky", "read_file", "Pass note="+leaked+" to read_file."+strings.Repeat(" Then check the result.", 100), day) +
		experienceLine("clean", "read_file", "Call read_file with an absolute path under /data.", day)
	if err := os.WriteFile(pack, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, home, false, "experiences", "import", pack)
	if hits := filesHolding(t, string(home), leaked); len(hits) == 0 {
		t.Fatal("the planted secret is on no file before the purge: the test proves nothing")
	}

	out := cli(t, home, false, "traces", "purge", "leaky-task", "leaky-task-2", "no-such-task")
	if !strings.Contains(out, "purged 2 task(s)") {
		t.Errorf("traces purge said %q", out)
	}
	out = cli(t, home, false, "experiences", "purge", "leaky")
	if !strings.Contains(out, "purged 1 experience(s)") {
		t.Errorf("experiences purge said %q", out)
	}
	if hits := filesHolding(t, string(home), leaked); len(hits) > 0 {
		t.Errorf("the secret is still on disk after the purge, in %v", hits)
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
	s := explicit(stdio(step("src", 9, 9*time.Second), "s1", 100), "after-purge")
	if err := c.Deliver(ctx, []hindsight.Step{s}); err != nil {
		t.Errorf("deliver after purge: %v", err)
	}
	if _, err := c.Task(ctx, "after-purge"); err != nil {
		t.Errorf("a task after the purge: %v", err)
	}
}
