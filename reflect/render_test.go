package reflect

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// bigTask has n successful reads of large files with one failure and its
// recovery in the middle.
func bigTask(n int) *hindsight.Task {
	t := &hindsight.Task{ID: "big", Servers: []string{"fs"}}
	body := strings.Repeat("lorem ipsum dolor sit amet ", 200)
	for i := range n {
		s := hindsight.Step{TaskID: "big", Server: "fs", StepIndex: i, Method: "tools/call", Tool: "read_file",
			Arguments: json.RawMessage(fmt.Sprintf(`{"path":"/data/f%d.txt"}`, i)), CausalTag: hindsight.TagSuccess}
		s.Result, _ = json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": body}}})
		if i == n/2 {
			s.CausalTag, s.IsError, s.ErrorCode = hindsight.TagFailure, true, "EACCES"
			s.Result = json.RawMessage(`{"content":[{"type":"text","text":"EACCES: permission denied"}],"isError":true}`)
		}
		if i == n/2+1 {
			s.CausalTag = hindsight.TagRecovery
		}
		t.Steps = append(t.Steps, s)
	}
	return t
}

func TestRenderBudget(t *testing.T) {
	tok, err := NewTokenizer("gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		steps, budget int
		elided        bool
	}{
		{3, 6000, false},
		{40, 6000, false},
		{400, 2000, true},
		{2000, 1000, true},
	} {
		t.Run(fmt.Sprintf("%d steps in %d tokens", c.steps, c.budget), func(t *testing.T) {
			task := bigTask(c.steps)
			r := &Renderer{Tokenizer: tok, Budget: c.budget}
			out, n := r.Render(task)
			if n > c.budget || tok.Count(out) != n {
				t.Fatalf("%d tokens (counted %d), budget %d", n, tok.Count(out), c.budget)
			}
			if !strings.Contains(out, "bytes cut]") {
				t.Error("long bodies not shortened with a marker")
			}
			fail := fmt.Sprintf("#%d [failure] fs/read_file", c.steps/2)
			if !strings.Contains(out, fail) || !strings.Contains(out, "error_code=EACCES") || !strings.Contains(out, fmt.Sprintf("#%d [recovery]", c.steps/2+1)) {
				t.Errorf("failure or recovery missing:\n%.2000s", out)
			}
			if got := strings.Contains(out, "routine successful steps omitted"); got != c.elided {
				t.Errorf("elided %v, want %v", got, c.elided)
			}
		})
	}
}

func TestShorten(t *testing.T) {
	s := strings.Repeat("é", 300) // multi-byte: cuts must not split runes
	got := shorten(s, 100)
	if !strings.Contains(got, "bytes cut]") || !strings.HasPrefix(got, "é") || !strings.HasSuffix(got, "é") {
		t.Fatalf("shorten: %q", got)
	}
	if !json.Valid([]byte(`"` + got + `"`)) {
		t.Fatal("shortened text is not valid UTF-8")
	}
	if shorten("short", 100) != "short" {
		t.Fatal("short text changed")
	}
}

// TestPipelineCrossCheck: the rules add a recovery lesson the model missed,
// but not one about failures the model's accepted lessons already cite.
func TestPipelineCrossCheck(t *testing.T) {
	task := tasktest.Load(t, "testdata/rules/login_401.trace.json")
	store := newMemStore()
	m := NewMetrics()
	p := &Pipeline{Validator: &Validator{Metrics: m}, Merger: &Merger{Store: store, Metrics: m}, CrossCheck: Rules{}}
	missed := reflectorFunc(func() []hindsight.Experience { return nil })
	p.Reflector = missed
	out, err := p.Process(t.Context(), task)
	if err != nil || len(out.Merged) != 1 || len(store.all()) != 1 {
		t.Fatalf("model missed the lesson: %+v %v", out, err)
	}
	store2 := newMemStore()
	p.Merger = &Merger{Store: store2}
	p.Reflector = reflectorFunc(func() []hindsight.Experience {
		return []hindsight.Experience{{Tool: "list_orders", Situation: "list_orders 401 before login",
			Lesson: "Call login before list_orders, it answers 401 otherwise.", Confidence: 0.9, SourceSteps: []int{2, 4}}}
	})
	if _, err := p.Process(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	all := store2.all()
	if len(all) != 1 || all[0].Lesson != "Call login before list_orders, it answers 401 otherwise." {
		t.Fatalf("cross-check duplicated a covered lesson: %+v", all)
	}
}

type reflectorFunc func() []hindsight.Experience

func (f reflectorFunc) Reflect(ctx context.Context, t *hindsight.Task) ([]hindsight.Experience, error) {
	return f(), nil
}

func TestRenderOnlyFailuresOverBudget(t *testing.T) {
	tok, err := NewTokenizer("")
	if err != nil {
		t.Fatal(err)
	}
	task := bigTask(300)
	for i := range task.Steps {
		task.Steps[i].CausalTag, task.Steps[i].IsError = hindsight.TagFailure, true
	}
	out, n := (&Renderer{Tokenizer: tok, Budget: 500}).Render(task)
	if n > 500 || !strings.Contains(out, "cut to fit the token budget") || !strings.HasPrefix(out, "#0 [failure]") {
		t.Fatalf("%d tokens:\n%.500s", n, out)
	}
}

func BenchmarkRender(b *testing.B) {
	tok, err := NewTokenizer("gpt-4o-mini")
	if err != nil {
		b.Fatal(err)
	}
	task := bigTask(200)
	r := &Renderer{Tokenizer: tok, Budget: DefaultTokenBudget}
	b.ReportAllocs()
	for b.Loop() {
		r.Render(task)
	}
}
