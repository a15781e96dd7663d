package reflect

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// TestRulesGolden runs the rule-based reflector on recorded traces and
// compares its experiences, after validation, with the golden files.
// refusedRules are the traces whose rule experience validation refuses,
// with the reason: a wrong path replaced by another says only "pass a
// different, valid path", which ENOENT already says.
var refusedRules = map[string]string{"wrong_path": DropVacuous}

func TestRulesGolden(t *testing.T) {
	traces, err := filepath.Glob("testdata/rules/*.trace.json")
	if err != nil || len(traces) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	for _, path := range traces {
		name := strings.TrimSuffix(filepath.Base(path), ".trace.json")
		t.Run(name, func(t *testing.T) {
			task := tasktest.Load(t, path)
			exps, err := Rules{}.Reflect(context.Background(), task)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Rules{}.Reflect(context.Background(), task)
			a, _ := json.Marshal(exps)
			b, _ := json.Marshal(again)
			if !bytes.Equal(a, b) {
				t.Fatalf("not deterministic:\n%s\n%s", a, b)
			}
			m := NewMetrics()
			kept, drops := (&Validator{Metrics: m}).Validate(task, exps)
			for _, d := range drops {
				if d.Reason != refusedRules[name] {
					t.Errorf("rule experience dropped by validation (%s: %s): %s", d.Reason, d.Detail, d.Experience.Lesson)
				}
			}
			if want := refusedRules[name]; want != "" && len(drops) == 0 {
				t.Errorf("no rule experience refused as %s", want)
			}
			got, err := json.MarshalIndent(kept, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "rules", name+".golden.json")
			testkit.Golden(t, golden, got)
		})
	}
}

// TestRulesLessons checks the substance of the golden cases, so an -update
// cannot bless a wrong lesson unnoticed.
func TestRulesLessons(t *testing.T) {
	cases := []struct {
		trace   string
		n       int
		tool    string
		steps   []int
		contain []string
		absent  []string // one task's own values must not show
		conf    float64
	}{
		// The 401 names login: an unambiguous precondition.
		{"login_401", 1, "list_orders", []int{2, 3, 4}, []string{"Call login before list_orders", "401", "call login first`"}, []string{"alice"}, unambiguousPrior},
		// Another path of the same shape: no rule names a value.
		{"wrong_path", 1, "read_file", []int{0, 1}, []string{"pass a different, valid path", "ENOENT", "open <*>`"}, []string{"/tmp/report.txt", "/data/report.txt"}, singlePrior},
		// The error asks for a format: the shapes, unambiguous.
		{"date_format", 1, "create_event", []int{0, 1}, []string{"pass date as YYYY-MM-DD, not DD/MM/YYYY", "expected ISO <*>`"}, []string{"2026-01-15", "15/01/2026"}, unambiguousPrior},
		{"always_fails", 1, "get_forecast", []int{0, 1, 2}, []string{"stop retrying it", "503"}, nil, singlePrior},
		{"repeated_identical", 1, "git_push", []int{0, 1}, []string{"do not repeat the identical call", "GH006"}, []string{"branch="}, singlePrior},
		{"transient", 1, "search_docs", []int{0, 1}, []string{"retry the identical call", "429"}, nil, unambiguousPrior},
		{"all_success", 0, "", nil, nil, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.trace, func(t *testing.T) {
			task := tasktest.Load(t, filepath.Join("testdata", "rules", c.trace+".trace.json"))
			exps, _ := Rules{}.Reflect(context.Background(), task)
			if len(exps) != c.n {
				t.Fatalf("got %d experiences, want %d: %+v", len(exps), c.n, exps)
			}
			if c.n == 0 {
				return
			}
			e := exps[0]
			if e.Tool != c.tool {
				t.Errorf("tool %q, want %q", e.Tool, c.tool)
			}
			if !slicesEqual(e.SourceSteps, c.steps) {
				t.Errorf("source steps %v, want %v", e.SourceSteps, c.steps)
			}
			text := e.Situation + " | " + e.Lesson
			for _, s := range c.contain {
				if !strings.Contains(text, s) {
					t.Errorf("lesson %q lacks %q", text, s)
				}
			}
			for _, s := range c.absent {
				if strings.Contains(text+" | "+e.Action+" | "+e.Result+" | "+e.ErrorTemplate, s) {
					t.Errorf("experience quotes %q, a value of this task only: %q", s, text)
				}
			}
			if e.Confidence != c.conf {
				t.Errorf("confidence %v, want %v", e.Confidence, c.conf)
			}
			if e.Origin != "rules" || e.ErrorTemplate == "" {
				t.Errorf("origin %q, template %q", e.Origin, e.ErrorTemplate)
			}
			if strings.Contains(text, "REDACTED") {
				t.Errorf("lesson shows a redacted value: %q", text)
			}
		})
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
