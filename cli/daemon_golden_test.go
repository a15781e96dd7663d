//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// volatile matches the JSON members that differ from run to run.
var volatile = regexp.MustCompile(`"(created_at|updated_at|last_hit_at|score)": ("[^"]*"|[0-9.e+-]+)`)

func stable(s string) string { return volatile.ReplaceAllString(s, `"$1": "<volatile>"`) }

func TestCLIGolden(t *testing.T) {
	ctx := context.Background()
	home := hindsight.Home(testkit.ShortTempDir(t))
	c := startDaemon(t, home)
	if err := c.Deliver(ctx, tasktest.GoldenSteps()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s1", "s2"} {
		if _, err := c.CloseSession(ctx, s, "", nil); err != nil {
			t.Fatal(err)
		}
	}

	// Let reflection (when the daemon has it) settle golden-a's state.
	if st, err := c.Status(ctx); err == nil && st.Reflection != nil {
		testkit.WaitFor(t, "golden-a's reflection to settle", 10*time.Second, func() bool {
			task, err := c.Task(ctx, "golden-a")
			return err == nil && task.Reflection != "" && task.Reflection != "pending"
		})
	}
	testkit.Golden(t, filepath.Join("testdata", "cli", "traces-list.json"), testbin.Run(t, string(home), false, "traces", "list", "--json"))
	testkit.Golden(t, filepath.Join("testdata", "cli", "traces-list.txt"), testbin.Run(t, string(home), false, "traces", "list"))
	testkit.Golden(t, filepath.Join("testdata", "cli", "traces-list-final.json"), testbin.Run(t, string(home), false, "traces", "list", "--final", "--json"))
	shown := testbin.Run(t, string(home), false, "traces", "show", "golden-b", "--json")
	testkit.Golden(t, filepath.Join("testdata", "cli", "traces-show.json"), shown)
	// The failed call reads with its error template, the others without.
	var task hindsight.Task
	if err := json.Unmarshal([]byte(shown), &task); err != nil || len(task.Steps) != 2 ||
		task.Steps[0].ErrorTemplate != "ENOENT: no such file" || task.Steps[1].ErrorTemplate != "" {
		t.Errorf("error templates on read: %v %+v", err, task.Steps)
	}
	testkit.Golden(t, filepath.Join("testdata", "cli", "traces-show.txt"), testbin.Run(t, string(home), false, "traces", "show", "golden-b"))
	export := testbin.Run(t, string(home), false, "traces", "export")
	testkit.Golden(t, filepath.Join("testdata", "cli", "traces-export.jsonl"), export)
	out := filepath.Join(testkit.ShortTempDir(t), "b.jsonl")
	testbin.Run(t, string(home), false, "traces", "export", "--task", "golden-b", "--out", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("export file mode %v, want 0600", fi.Mode().Perm())
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 2 || !strings.HasSuffix(export, string(b)) {
		t.Errorf("export --task golden-b:\n%s", b)
	}
	if got := testbin.Run(t, string(home), true, "traces", "show", "no-such-task"); got != "" {
		t.Errorf("show of an unknown task printed %q", got)
	}

	// Experiences: a pack in, list, search, forget, restore, export.
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	pack := filepath.Join(testkit.ShortTempDir(t), "pack.jsonl")
	if err := os.WriteFile(pack, []byte(
		tasktest.ExperienceLine("e1", "read_file", "Call read_file with an absolute path under /data; relative paths fail with ENOENT.", day)+
			tasktest.ExperienceLine("e2", "list_directory", "Call list_directory on /data before read_file to learn the file names.", day)), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, filepath.Join("testdata", "cli", "experiences-import.json"), testbin.Run(t, string(home), false, "experiences", "import", pack, "--json"))
	testkit.Golden(t, filepath.Join("testdata", "cli", "experiences-list.json"), stable(testbin.Run(t, string(home), false, "experiences", "list", "--json")))
	testkit.Golden(t, filepath.Join("testdata", "cli", "experiences-search.json"), stable(testbin.Run(t, string(home), false, "experiences", "search", "read_file ENOENT relative path", "--tool", "read_file", "-k", "1", "--json")))
	testkit.Golden(t, filepath.Join("testdata", "cli", "experiences-forget.json"), stable(testbin.Run(t, string(home), false, "experiences", "forget", "e2", "--json")))
	if got := testbin.Run(t, string(home), false, "experiences", "list", "--json"); strings.Contains(got, `"e2"`) {
		t.Errorf("a forgotten experience is listed:\n%s", got)
	}
	testbin.Run(t, string(home), false, "experiences", "restore", "e2")
	exported := testbin.Run(t, string(home), false, "experiences", "export")
	if n := strings.Count(exported, "\n"); n != 2 {
		t.Errorf("export has %d lines, want 2:\n%s", n, exported)
	}

	// Status: JSON for scripts, one line per part for people.
	var st daemon.Status
	if err := json.Unmarshal([]byte(testbin.Run(t, string(home), false, "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.Traces.Tasks != 2 || st.Traces.FinalTasks != 1 || st.Traces.Steps != 5 ||
		st.Experiences.Active != 2 || st.Disk["traces"] <= 0 || st.Outboxes == nil {
		t.Errorf("status = %+v", st)
	}
	human := testbin.Run(t, string(home), false, "status")
	for _, want := range []string{"daemon", "running", "traces", "2 tasks", "experiences", "2 active", "outboxes"} {
		if !strings.Contains(human, want) {
			t.Errorf("status lacks %q:\n%s", want, human)
		}
	}
}

func TestCLIStatusWithoutDaemon(t *testing.T) {
	home := hindsight.Home(testkit.ShortTempDir(t))
	out := testbin.Run(t, string(home), true, "status", "--json")
	var st daemon.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Running || st.Daemon != nil {
		t.Fatalf("status without a daemon = %+v", st)
	}
	if _, err := os.Stat(home.Socket()); err == nil {
		t.Fatal("status started a daemon")
	}
}

// startDaemon runs `hindsight daemon` in home, killed at the end of the
// test, and waits until it answers.
func startDaemon(t *testing.T, home hindsight.Home) *daemon.Client {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), "daemon")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	c := daemon.NewClient(home.Socket())
	testkit.WaitFor(t, "the daemon to answer", 30*time.Second, func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("daemon exited: %v\n%s", err, stderr.String())
		default:
		}
		_, err := c.Health(context.Background())
		return err == nil
	})
	return c
}
