package reflect

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/tasktest"
)

// fakeSecrets stands in for the capture redactor: it replaces bearer tokens
// and sk- keys.
var fakeSecrets = RedactorFunc(func(s string) (string, int) {
	re := regexp.MustCompile(`sk-[A-Za-z0-9]{16,}|Bearer [A-Za-z0-9._-]{10,}`)
	n := len(re.FindAllString(s, -1))
	return re.ReplaceAllString(s, "[REDACTED]"), n
})

func TestValidate(t *testing.T) {
	task := tasktest.Load(t, filepath.Join("testdata", "rules", "login_401.trace.json"))
	good := hindsight.Experience{
		Situation: "list_orders returns 401 before login", Action: "called login", Result: "ok",
		Lesson: "Call login before list_orders; without it list_orders fails with 401.", Confidence: 0.9,
		SourceSteps: []int{2, 3, 4}, Tool: "list_orders",
	}
	with := func(f func(e *hindsight.Experience)) hindsight.Experience {
		e := good
		e.SourceSteps = append([]int(nil), good.SourceSteps...)
		f(&e)
		return e
	}
	cases := []struct {
		name   string
		in     hindsight.Experience
		reason string
	}{
		{"good", good, ""},
		{"no lesson", with(func(e *hindsight.Experience) { e.Lesson = " " }), DropIncomplete},
		{"no situation", with(func(e *hindsight.Experience) { e.Situation = "" }), DropIncomplete},
		{"no steps", with(func(e *hindsight.Experience) { e.SourceSteps = nil }), DropNoSteps},
		{"invented step", with(func(e *hindsight.Experience) { e.SourceSteps = []int{2, 9} }), DropInventedStep},
		{"negative step", with(func(e *hindsight.Experience) { e.SourceSteps = []int{-1} }), DropInventedStep},
		{"tool not cited", with(func(e *hindsight.Experience) { e.SourceSteps = []int{3} }), DropToolMismatch},
		{"unknown tool", with(func(e *hindsight.Experience) { e.Tool = "delete_orders" }), DropToolMismatch},
		{"low confidence", with(func(e *hindsight.Experience) { e.Confidence = 0.4 }), DropLowConfidence},
		{"missing confidence", with(func(e *hindsight.Experience) { e.Confidence = nan() }), DropLowConfidence},
		{"be careful", with(func(e *hindsight.Experience) { e.Lesson = "Be careful when calling list_orders." }), DropVague},
		{"double check", with(func(e *hindsight.Experience) { e.Lesson = "Always double-check your inputs before making calls." }), DropVague},
		{"generic", with(func(e *hindsight.Experience) { e.Lesson = "Handle errors gracefully and try again later." }), DropVague},
		{"acronyms only", with(func(e *hindsight.Experience) { e.Lesson = "Be careful with the API and check the JSON you send." }), DropVague},
		{"too short", with(func(e *hindsight.Experience) { e.Lesson = "Login first." }), DropVague},
		{"names argument", with(func(e *hindsight.Experience) { e.Lesson = "Pass status as one of open or closed to the orders tool." }), ""},
		{"careful but concrete", with(func(e *hindsight.Experience) {
			e.Lesson = "Be careful: list_orders needs login called first, else 401."
		}), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMetrics()
			v := &Validator{Metrics: m}
			kept, drops := v.Validate(task, []hindsight.Experience{c.in})
			if c.reason == "" {
				if len(kept) != 1 {
					t.Fatalf("dropped: %+v", drops)
				}
				e := kept[0]
				if e.SourceTask != task.ID || e.Server != "shop" || e.ErrorCode != "401" || e.SourceAgent != "claude-code" {
					t.Errorf("not completed from the trace: %+v", e)
				}
				return
			}
			if len(drops) != 1 || drops[0].Reason != c.reason {
				t.Fatalf("drops %+v, want reason %s", drops, c.reason)
			}
			if got := m.Dropped()[c.reason]; got != 1 {
				t.Errorf("counter %s = %d, want 1", c.reason, got)
			}
		})
	}
}

func TestValidateFillsToolAndRedacts(t *testing.T) {
	task := tasktest.Load(t, filepath.Join("testdata", "rules", "login_401.trace.json"))
	e := hindsight.Experience{
		Situation:   "list_orders says 401 Unauthorized",
		Lesson:      "Call login before list_orders, then send Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def with each call.",
		Action:      "used key sk-abcdefghijklmnop1234",
		Confidence:  0.8,
		SourceSteps: []int{4, 2, 2},
	}
	kept, _ := (&Validator{Redactor: fakeSecrets}).Validate(task, []hindsight.Experience{e})
	if len(kept) != 1 {
		t.Fatal("dropped")
	}
	got := kept[0]
	if got.Tool != "list_orders" {
		t.Errorf("tool %q, want list_orders from the failing cited step", got.Tool)
	}
	if !slicesEqual(got.SourceSteps, []int{2, 4}) {
		t.Errorf("steps %v, want sorted and unique", got.SourceSteps)
	}
	for _, s := range []string{got.Lesson, got.Action} {
		if strings.Contains(s, "eyJhbGci") || strings.Contains(s, "sk-abc") || !strings.Contains(s, "[REDACTED]") {
			t.Errorf("secret kept: %q", s)
		}
	}
}

func nan() float64 { var z float64; return z / z }
