//go:build unix

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/testbin"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// cli runs `hindsight args…` against home in UTC and returns its stdout;
// it fails the test when the command fails, unless wantErr.
func cli(t *testing.T, home hindsight.Home, wantErr bool, args ...string) string {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(home), "TZ=UTC")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if (err != nil) != wantErr {
		t.Fatalf("hindsight %s: err %v (want error: %v)\nstderr: %s", strings.Join(args, " "), err, wantErr, stderr.String())
	}
	return stdout.String()
}

// golden compares got with testdata/cli/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "cli", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run with -update if the change is right)\ngot:\n%s\nwant:\n%s", name, path, got, want)
	}
}

// volatile matches the JSON members that differ from run to run.
var volatile = regexp.MustCompile(`"(created_at|updated_at|last_hit_at|score)": ("[^"]*"|[0-9.e+-]+)`)

func stable(s string) string { return volatile.ReplaceAllString(s, `"$1": "<volatile>"`) }

func TestCLIGolden(t *testing.T) {
	ctx := context.Background()
	home := hindsight.Home(shortTempDir(t))
	_, c := startDaemon(t, home)
	if err := c.Deliver(ctx, goldenSteps()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s1", "s2"} {
		if _, err := c.CloseSession(ctx, s, "", nil); err != nil {
			t.Fatal(err)
		}
	}

	// Let reflection (when the daemon has it) settle golden-a's state.
	if st, err := c.Status(ctx); err == nil && st.Reflection != nil {
		waitFor(t, func() bool {
			task, err := c.Task(ctx, "golden-a")
			return err == nil && task.Reflection != "" && task.Reflection != "pending"
		})
	}
	golden(t, "traces-list.json", cli(t, home, false, "traces", "list", "--json"))
	golden(t, "traces-list.txt", cli(t, home, false, "traces", "list"))
	golden(t, "traces-list-final.json", cli(t, home, false, "traces", "list", "--final", "--json"))
	shown := cli(t, home, false, "traces", "show", "golden-b", "--json")
	golden(t, "traces-show.json", shown)
	// The failed call reads with its error template, the others without.
	var task hindsight.Task
	if err := json.Unmarshal([]byte(shown), &task); err != nil || len(task.Steps) != 2 ||
		task.Steps[0].ErrorTemplate != "ENOENT: no such file" || task.Steps[1].ErrorTemplate != "" {
		t.Errorf("error templates on read: %v %+v", err, task.Steps)
	}
	golden(t, "traces-show.txt", cli(t, home, false, "traces", "show", "golden-b"))
	export := cli(t, home, false, "traces", "export")
	golden(t, "traces-export.jsonl", export)
	out := filepath.Join(shortTempDir(t), "b.jsonl")
	cli(t, home, false, "traces", "export", "--task", "golden-b", "--out", out)
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
	if got := cli(t, home, true, "traces", "show", "no-such-task"); got != "" {
		t.Errorf("show of an unknown task printed %q", got)
	}

	// Experiences: a pack in, list, search, forget, restore, export.
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	pack := filepath.Join(shortTempDir(t), "pack.jsonl")
	if err := os.WriteFile(pack, []byte(
		experienceLine("e1", "read_file", "Call read_file with an absolute path under /data; relative paths fail with ENOENT.", day)+
			experienceLine("e2", "list_directory", "Call list_directory on /data before read_file to learn the file names.", day)), 0o600); err != nil {
		t.Fatal(err)
	}
	golden(t, "experiences-import.json", cli(t, home, false, "experiences", "import", pack, "--json"))
	golden(t, "experiences-list.json", stable(cli(t, home, false, "experiences", "list", "--json")))
	golden(t, "experiences-search.json", stable(cli(t, home, false, "experiences", "search", "read_file ENOENT relative path", "--tool", "read_file", "-k", "1", "--json")))
	golden(t, "experiences-forget.json", stable(cli(t, home, false, "experiences", "forget", "e2", "--json")))
	if got := cli(t, home, false, "experiences", "list", "--json"); strings.Contains(got, `"e2"`) {
		t.Errorf("a forgotten experience is listed:\n%s", got)
	}
	cli(t, home, false, "experiences", "restore", "e2")
	exported := cli(t, home, false, "experiences", "export")
	if n := strings.Count(exported, "\n"); n != 2 {
		t.Errorf("export has %d lines, want 2:\n%s", n, exported)
	}

	// Status: JSON for scripts, one line per part for people.
	var st Status
	if err := json.Unmarshal([]byte(cli(t, home, false, "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.Traces.Tasks != 2 || st.Traces.FinalTasks != 1 || st.Traces.Steps != 5 ||
		st.Experiences.Active != 2 || st.Disk["traces"] <= 0 || st.Outboxes == nil {
		t.Errorf("status = %+v", st)
	}
	human := cli(t, home, false, "status")
	for _, want := range []string{"daemon", "running", "traces", "2 tasks", "experiences", "2 active", "outboxes"} {
		if !strings.Contains(human, want) {
			t.Errorf("status lacks %q:\n%s", want, human)
		}
	}
}

func TestCLIStatusWithoutDaemon(t *testing.T) {
	home := hindsight.Home(shortTempDir(t))
	out := cli(t, home, true, "status", "--json")
	var st Status
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
