package reflect

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/inject"
)

// TestCreditHarmed: an experience shown on an error result, after which
// the same call failed with the same error, counts one counter-example and
// its confidence follows the evidence down.
func TestCreditHarmed(t *testing.T) {
	const errText = "401 Unauthorized: session expired"
	failed := func(i int, shown ...string) hindsight.Step {
		content := []any{map[string]any{"type": "text", "text": errText}}
		s := hindsight.Step{TaskID: "t-harm", StepIndex: i, Server: "shop", Method: "tools/call", Tool: "list_orders", Direction: hindsight.ClientToServer,
			Arguments: json.RawMessage(`{"status":"open"}`), IsError: true, ErrorCode: "401", CausalTag: hindsight.TagFailure}
		if len(shown) > 0 {
			content = append(content, map[string]any{"type": "text", "text": inject.Marker + " Lessons from past runs about list_orders and this error:\n- pass status"})
			s.Injected = []hindsight.Injection{{Channel: inject.ChannelErrorResult, ExperienceIDs: shown, Tokens: 30}}
		}
		s.Result, _ = json.Marshal(map[string]any{"content": content, "isError": true})
		return s
	}
	succeeded := func(i int) hindsight.Step {
		return hindsight.Step{TaskID: "t-harm", StepIndex: i, Server: "shop", Method: "tools/call", Tool: "list_orders", Direction: hindsight.ClientToServer,
			Arguments: json.RawMessage(`{"status":"open"}`), Result: json.RawMessage(`{"content":[{"type":"text","text":"[]"}]}`), CausalTag: hindsight.TagRecovery}
	}
	stored := func(evidence int, conf float64, origin string) hindsight.Experience {
		return hindsight.Experience{
			ID: "exp_harm", Namespace: hindsight.DefaultNamespace, Server: "shop", Tool: "list_orders", ErrorCode: "401",
			ErrorTemplate: "<*> Unauthorized: session expired",
			Situation:     "list_orders failed with 401: `<*> Unauthorized: session expired`",
			Lesson:        "When list_orders fails with `<*> Unauthorized: session expired`: pass status (one of \"open\", \"closed\").",
			Confidence:    conf, EvidenceCount: evidence, Origin: origin, SourceTask: "t-earlier", SourceSteps: []int{0, 1},
		}
	}
	cases := []struct {
		name        string
		exp         hindsight.Experience
		steps       []hindsight.Step
		counter     int
		conf        float64
		unchangedAt bool // no Put at all
	}{
		{"harmed", stored(2, Confidence(2, 0, false), "rules"),
			[]hindsight.Step{failed(0, "exp_harm"), failed(1), succeeded(2)}, 1, Confidence(2, 1, false), false},
		{"harmed, unambiguous", stored(2, Confidence(2, 0, true), "rules"),
			[]hindsight.Step{failed(0, "exp_harm"), failed(1)}, 1, Confidence(2, 1, true), false},
		{"harmed, from a model", stored(2, Confidence(2, 0, false), "llm:m"),
			[]hindsight.Step{failed(0, "exp_harm"), failed(1)}, 1, Confidence(2, 1, false), false},
		{"harmed, evidence not recorded", stored(0, singlePrior, "rules"),
			[]hindsight.Step{failed(0, "exp_harm"), failed(1)}, 1, Confidence(1, 1, false), false},
		// A lesson written by hand keeps its confidence; the counter is
		// still kept.
		{"harmed, manual", stored(2, 0.9, "manual"),
			[]hindsight.Step{failed(0, "exp_harm"), failed(1)}, 1, 0.9, false},
		{"helped", stored(2, Confidence(2, 0, false), "rules"),
			[]hindsight.Step{failed(0, "exp_harm"), succeeded(1)}, 0, Confidence(2, 0, false), true},
		{"not shown", stored(2, Confidence(2, 0, false), "rules"),
			[]hindsight.Step{failed(0), failed(1)}, 0, Confidence(2, 0, false), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			st := newMemStore()
			e := c.exp
			if err := st.Put(ctx, &e); err != nil {
				t.Fatal(err)
			}
			p := &Pipeline{Merger: &Merger{Store: st}, Harmed: inject.Harmed, Helped: inject.Helped}
			task := &hindsight.Task{ID: "t-harm", Final: true, Steps: c.steps}
			if err := p.Credit(ctx, task); err != nil {
				t.Fatal(err)
			}
			got, err := st.Get(ctx, hindsight.DefaultNamespace, "exp_harm")
			if err != nil {
				t.Fatal(err)
			}
			if got.CounterCount != c.counter {
				t.Errorf("counter %d, want %d", got.CounterCount, c.counter)
			}
			if got.Confidence != c.conf {
				t.Errorf("confidence %v, want %v", got.Confidence, c.conf)
			}
			if got.EvidenceCount != c.exp.EvidenceCount || got.Lesson != c.exp.Lesson {
				t.Errorf("evidence %d lesson %q changed", got.EvidenceCount, got.Lesson)
			}
			if c.unchangedAt && got.Version != 1 {
				t.Errorf("version %d: stored again without counter-evidence", got.Version)
			}
			if !c.unchangedAt && got.Version != 2 {
				t.Errorf("version %d, want 2", got.Version)
			}
		})
	}
}

// TestCreditHarmedTwice: each harmful task counts once more, the
// confidence sinking with each, below the injection gate after the first.
func TestCreditHarmedTwice(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	e := hindsight.Experience{ID: "exp_x", Namespace: hindsight.DefaultNamespace, Tool: "list_orders", Lesson: "When list_orders fails, pass status.",
		Confidence: Confidence(2, 0, false), EvidenceCount: 2, Origin: "rules", SourceTask: "t0"}
	if err := st.Put(ctx, &e); err != nil {
		t.Fatal(err)
	}
	p := &Pipeline{Merger: &Merger{Store: st}, Harmed: func(*hindsight.Task) []string { return []string{"exp_x", "exp_forgotten"} }}
	want := []float64{Confidence(2, 1, false), Confidence(2, 2, false)}
	for i, w := range want {
		if err := p.Credit(ctx, &hindsight.Task{ID: "t" + string(rune('1'+i))}); err != nil {
			t.Fatalf("credit %d: %v (a forgotten experience is no error)", i, err)
		}
		got, _ := st.Get(ctx, hindsight.DefaultNamespace, "exp_x")
		if got.CounterCount != i+1 || got.Confidence != w {
			t.Errorf("after %d harmful tasks: counter %d confidence %v, want %d and %v", i+1, got.CounterCount, got.Confidence, i+1, w)
		}
		if got.Confidence >= DefaultInjectConfidence {
			t.Errorf("confidence %v still passes the injection gate", got.Confidence)
		}
	}
}

// TestCreditHitsOnlyWhenUsed: a task that succeeded credits a hit to a
// lesson only when the lesson's tool was called, and succeeded, after the
// lesson was shown; a lesson shown beside unrelated work gains nothing.
func TestCreditHitsOnlyWhenUsed(t *testing.T) {
	instr := func(ids ...string) hindsight.Step {
		return hindsight.Step{TaskID: "t-hit", StepIndex: 0, Server: "shop", Method: "initialize", Direction: hindsight.ClientToServer,
			CausalTag: hindsight.TagSuccess, Injected: []hindsight.Injection{{Channel: inject.ChannelInstructions, ExperienceIDs: ids, Tokens: 40}}}
	}
	ok := func(i int, tool string) hindsight.Step {
		return hindsight.Step{TaskID: "t-hit", StepIndex: i, Server: "shop", Method: "tools/call", Tool: tool, Direction: hindsight.ClientToServer,
			Arguments: json.RawMessage(`{}`), Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), CausalTag: hindsight.TagSuccess}
	}
	ctx := context.Background()
	st := newMemStore()
	for _, e := range []hindsight.Experience{
		{ID: "exp_used", Namespace: hindsight.DefaultNamespace, Server: "shop", Tool: "list_orders", Situation: "s", Lesson: "Call login before list_orders.", Confidence: 0.7, EvidenceCount: 2},
		{ID: "exp_idle", Namespace: hindsight.DefaultNamespace, Server: "shop", Tool: "refund_payment", Situation: "s", Lesson: "Pass currency to refund_payment.", Confidence: 0.7, EvidenceCount: 2},
	} {
		if err := st.Put(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	task := &hindsight.Task{ID: "t-hit", Final: true, Steps: []hindsight.Step{instr("exp_used", "exp_idle"), ok(1, "login"), ok(2, "list_orders")}}
	hits := &hitRecorder{memStore: st}
	p := &Pipeline{Merger: &Merger{Store: hits}, Helped: inject.Helped}
	if err := p.Credit(ctx, task); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hits.ids, []string{"exp_used"}) {
		t.Errorf("hits recorded for %v, want [exp_used]", hits.ids)
	}
}

// hitRecorder is a memStore that remembers the ids it was given hits for.
type hitRecorder struct {
	*memStore
	ids []string
}

func (h *hitRecorder) RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error {
	h.ids = append(h.ids, ids...)
	return nil
}
