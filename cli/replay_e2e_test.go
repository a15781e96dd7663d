package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// hs runs the hindsight binary in home and returns its stdout.
func hs(t *testing.T, home string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("hindsight %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// waitReflected waits until the daemon of home has reflected n tasks.
func waitReflected(t *testing.T, home string, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st daemon.Status
		if err := json.Unmarshal([]byte(hs(t, home, "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if r := st.Reflection; r != nil && r.Done+r.Failed >= n && r.Pending == 0 && r.Running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reflection did not finish: %+v", st.Reflection)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestImportAndReflectReplay imports the trace corpus (twice: the second
// time changes nothing), checks that export → import → export gives the
// same export, then replays reflection over it: --dry-run prints a plan and
// changes nothing; without it the store changes as planned.
func TestImportAndReflectReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hindsight and runs its daemon")
	}
	corpus, _ := filepath.Abs("../testdata/corpus/traces.jsonl")
	b, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	steps := bytes.Count(b, []byte("\n"))

	home := testbin.Home(t)
	if out := hs(t, home, "traces", "import", corpus); !strings.Contains(out, "imported "+strconv.Itoa(steps)+" steps (0 already present)") {
		t.Fatalf("first import: %s", out)
	}
	tasks := hs(t, home, "traces", "list", "--json")
	exportA := hs(t, home, "traces", "export")
	if out := hs(t, home, "traces", "import", corpus); !strings.Contains(out, "imported 0 steps ("+strconv.Itoa(steps)+" already present)") {
		t.Fatalf("second import: %s", out)
	}
	if again := hs(t, home, "traces", "list", "--json"); !sameTasks(t, tasks, again) {
		t.Fatalf("re-import changed the tasks")
	}

	// Another machine: export → import → export.
	other := testbin.Home(t)
	exportFile := filepath.Join(t.TempDir(), "a.jsonl")
	if err := os.WriteFile(exportFile, []byte(exportA), 0o600); err != nil {
		t.Fatal(err)
	}
	hs(t, other, "traces", "import", exportFile)
	waitReflected(t, other, 60)
	waitReflected(t, home, 60)
	if exportB := hs(t, other, "traces", "export"); exportB != hs(t, home, "traces", "export") {
		t.Fatalf("export → import → export differs")
	}

	experiences := func() string { return hs(t, home, "experiences", "list", "--json", "--all") }
	e0 := experiences()
	var plan daemon.ReflectPlan
	out := hs(t, home, "reflect", "--replay", "--dry-run", "--reflector", "rules", "--quiet", "--json")
	if err := json.Unmarshal([]byte(out), &plan); err != nil || !plan.DryRun || plan.Tasks != 60 || len(plan.Changes) == 0 {
		t.Fatalf("dry run plan: %v\n%s", err, out)
	}
	if e1 := experiences(); e1 != e0 {
		t.Fatalf("the dry run changed the experiences")
	}
	if text := hs(t, home, "reflect", "--replay", "--dry-run", "--reflector", "rules", "--quiet", "--since", "2000-01-01"); !strings.Contains(text, "60 tasks") || !strings.Contains(text, "dry run: nothing changed") {
		t.Fatalf("dry run table:\n%s", text)
	}

	var applied daemon.ReflectPlan
	out = hs(t, home, "reflect", "--replay", "--reflector", "rules", "--quiet", "--json")
	if err := json.Unmarshal([]byte(out), &applied); err != nil || applied.DryRun {
		t.Fatalf("applied plan: %v\n%s", err, out)
	}
	if len(applied.Changes) != len(plan.Changes) {
		t.Fatalf("applied %d changes, planned %d", len(applied.Changes), len(plan.Changes))
	}
	for i, c := range applied.Changes {
		p := plan.Changes[i]
		if c.Task != p.Task || c.Outcome != p.Outcome || c.Tool != p.Tool || c.Lesson != p.Lesson {
			t.Errorf("change %d: applied %+v, planned %+v", i, c, p)
		}
	}
	// --since after every task: nothing to do.
	out = hs(t, home, "reflect", "--replay", "--dry-run", "--quiet", "--json", "--since", "2100-01-01")
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Tasks != 0 {
		t.Fatalf("--since in the future: %v\n%s", err, out)
	}
}

// sameTasks compares two `traces list --json` outputs, ignoring the
// reflection state (the daemon reflects meanwhile).
func sameTasks(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y []map[string]any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil || len(x) != len(y) {
		return false
	}
	for i := range x {
		delete(x[i], "reflection")
		delete(y[i], "reflection")
		xb, _ := json.Marshal(x[i])
		yb, _ := json.Marshal(y[i])
		if string(xb) != string(yb) {
			t.Logf("%s\n%s", xb, yb)
			return false
		}
	}
	return true
}
