package reflect

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	storepkg "github.com/hindsight-proxy/hindsight/store"
)

// wordEmbedder is a deterministic offline Embedder for tests.
type wordEmbedder struct{}

func (wordEmbedder) Name() string { return "test-words" }
func (wordEmbedder) Dim() int     { return 256 }
func (wordEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = bagOfWords(t)
	}
	return out, nil
}

// backend is an ExperienceStore under test.
type backend struct {
	name string
	open func(t *testing.T) hindsight.ExperienceStore
	emb  hindsight.Embedder // what the Merger compares with
}

// backends lists the stores merging is tested against.
func backends() []backend {
	bs := []backend{{"mem", func(t *testing.T) hindsight.ExperienceStore { return newMemStore() }, wordEmbedder{}}}
	return append(bs, extraBackends...)
}

// extraBackends is filled by tests of real stores (embedded_test.go).
var extraBackends []backend

func exp(task string, conf float64, situation, lesson string, steps ...int) hindsight.Experience {
	return hindsight.Experience{
		Tool: "list_orders", Server: "shop", ErrorCode: "401",
		Situation: situation, Action: "called login first", Result: "list_orders succeeded",
		Lesson: lesson, Confidence: conf, SourceTask: task, SourceSteps: steps,
	}
}

func liveAndAll(t *testing.T, s hindsight.ExperienceStore) (live, all []hindsight.Experience) {
	t.Helper()
	ctx := context.Background()
	live, err := s.List(ctx, hindsight.ListOptions{Namespace: hindsight.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	all, err = s.List(ctx, hindsight.ListOptions{Namespace: hindsight.DefaultNamespace, IncludeSuperseded: true})
	if err != nil {
		t.Fatal(err)
	}
	return live, all
}

func mergeDuplicate(t *testing.T, b backend) {
	const sit = "list_orders fails with 401 Unauthorized before login"
	{
		{
			ctx := context.Background()
			store := b.open(t)
			m := NewMetrics()
			mg := &Merger{Store: store, Embedder: b.emb, Metrics: m}
			first := exp("t1", 0.7, sit, "Call login before list_orders; without it list_orders fails with 401.", 2, 4)
			res, err := mg.Merge(ctx, time.Now(), []hindsight.Experience{first})
			if err != nil || len(res) != 1 || res[0].Outcome != Added {
				t.Fatalf("first merge: %+v %v", res, err)
			}
			id := res[0].ID
			// The same lesson again from the same task: not new evidence.
			res, err = mg.Merge(ctx, time.Now(), []hindsight.Experience{first})
			if err != nil || res[0].Outcome != Reinforced || res[0].ID != id {
				t.Fatalf("same task: %+v %v", res, err)
			}
			// Reworded, more confident, from another task.
			better := exp("t2", 0.9, sit, "Call login before list_orders, otherwise list_orders fails with 401 `Unauthorized`.", 0, 1)
			vs, _ := b.emb.Embed(ctx, []string{storepkg.Text(&first), storepkg.Text(&better)})
			if cos := storepkg.Cosine(vs[0], vs[1]); cos < DefaultDuplicateThreshold {
				t.Fatalf("test texts not near-duplicates: cosine %.3f", cos)
			}
			res, err = mg.Merge(ctx, time.Now(), []hindsight.Experience{better})
			if err != nil || res[0].Outcome != Reinforced || res[0].ID != id {
				t.Fatalf("reworded: %+v %v", res, err)
			}
			live, all := liveAndAll(t, store)
			if len(live) != 1 || len(all) != 1 {
				t.Fatalf("%d live, %d total, want 1 and 1", len(live), len(all))
			}
			got := live[0]
			if got.EvidenceCount != 2 {
				t.Errorf("evidence %d, want 2", got.EvidenceCount)
			}
			// Confidence follows the evidence: two tasks, one of them
			// unambiguous (its candidate was at least unambiguousPrior).
			if got.Lesson != better.Lesson || got.Confidence != Confidence(2, 0, true) || got.SourceTask != "t2" || !slicesEqual(got.SourceSteps, []int{0, 1}) {
				t.Errorf("better text not kept: %+v", got)
			}
			if got.Version != 2 {
				t.Errorf("version %d, want 2 (the same task again changes nothing; the rewording is one Put)", got.Version)
			}
			// Less confident rewording: counted, text kept.
			worse := exp("t3", 0.65, sit, "Call login before list_orders or list_orders fails with 401.", 3)
			if _, err := mg.Merge(ctx, time.Now(), []hindsight.Experience{worse}); err != nil {
				t.Fatal(err)
			}
			live, _ = liveAndAll(t, store)
			if len(live) != 1 || live[0].EvidenceCount != 3 || live[0].Lesson != better.Lesson || live[0].Confidence != Confidence(3, 0, true) {
				t.Errorf("after a weaker duplicate: %+v", live)
			}
			if m.Merged()[Added] != 1 || m.Merged()[Reinforced] != 3 {
				t.Errorf("merge counters %v", m.Merged())
			}
		}
	}
}

func mergeDistinct(t *testing.T, b backend) {
	{
		{
			ctx := context.Background()
			store := b.open(t)
			mg := &Merger{Store: store}
			a := exp("t1", 0.8, "list_orders fails with 401 before login", "Call login before list_orders; without it list_orders fails with 401.", 1)
			other := a
			other.Tool = "list_invoices"
			other.Lesson = "Call login before list_invoices; without it list_invoices fails with 401."
			c := exp("t2", 0.8, "list_orders returns 400 for status=all", "Pass status=\"open\" or \"closed\" to list_orders; \"all\" is rejected with 400.", 3)
			res, err := mg.Merge(ctx, time.Now(), []hindsight.Experience{a, other, c})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Outcome != Added {
					t.Errorf("outcome %s, want added: %+v", r.Outcome, res)
				}
			}
			live, _ := liveAndAll(t, store)
			if len(live) != 3 {
				t.Fatalf("%d live experiences, want 3", len(live))
			}
		}
	}
}

func mergeSupersede(t *testing.T, b backend) {
	cases := []struct {
		name     string
		old, new string
	}{
		{"negation",
			"Call login before list_orders; list_orders fails with 401 without a session.",
			"Do not call login before list_orders; list_orders fails with 401 without a session token, pass token instead."},
		{"reversed value",
			`When calling create_event, pass date in the form NN/NN/NNNN (like "15/01/2026"), not NNNN-NN-NN (like "2026-01-15") (otherwise it failed with 400).`,
			`When calling create_event, pass date in the form NNNN-NN-NN (like "2026-01-15"), not NN/NN/NNNN (like "15/01/2026") (otherwise it failed with 400).`},
	}
	const sit = "list_orders failed with 401: Unauthorized"
	{
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				store := b.open(t)
				m := NewMetrics()
				mg := &Merger{Store: store, Embedder: b.emb, Metrics: m}
				old := exp("t1", 0.8, sit, c.old, 1)
				res, err := mg.Merge(ctx, time.Now(), []hindsight.Experience{old})
				if err != nil {
					t.Fatal(err)
				}
				oldID := res[0].ID
				// Evidence from a task older than the stored lesson loses.
				stale := exp("t0", 0.9, sit, c.new, 2)
				res, err = mg.Merge(ctx, time.Now().Add(-time.Hour), []hindsight.Experience{stale})
				if err != nil || res[0].Outcome != DropStale {
					t.Fatalf("stale contradiction: %+v %v", res, err)
				}
				if m.Dropped()[DropStale] != 1 {
					t.Errorf("stale not counted: %v", m.Dropped())
				}
				newer := exp("t2", 0.85, sit, c.new, 2)
				res, err = mg.Merge(ctx, time.Now().Add(time.Hour), []hindsight.Experience{newer})
				if err != nil || res[0].Outcome != Superseded || res[0].Superseded != oldID {
					t.Fatalf("contradiction: %+v %v", res, err)
				}
				newID := res[0].ID
				live, all := liveAndAll(t, store)
				if len(live) != 1 || live[0].ID != newID || live[0].Lesson != c.new {
					t.Fatalf("live %+v, want only the new lesson", live)
				}
				if len(all) != 2 {
					t.Fatalf("%d experiences in all, want the old one kept", len(all))
				}
				got, err := store.Get(ctx, hindsight.DefaultNamespace, oldID)
				if err != nil {
					t.Fatal(err)
				}
				if got.SupersededBy != newID || got.Deleted || got.Version != 2 || got.Lesson != c.old {
					t.Errorf("old experience: superseded_by=%q deleted=%v version=%d lesson=%q", got.SupersededBy, got.Deleted, got.Version, got.Lesson)
				}
			})
		}
	}
}

func TestContradicts(t *testing.T) {
	cases := []struct {
		newer, older string
		want         bool
	}{
		{"Do not call login before list_orders.", "Call login before list_orders.", true},
		{"Call login before list_orders.", "Avoid calling login before list_orders.", true},
		{"Call login before list_orders.", "Call login before list_orders first.", false},
		{"Avoid get_forecast: it failed with 503.", "Call login before list_orders.", false},
		{`set path to "/b", not "/a"`, `set path to "/a", not "/b"`, true},
		{`set path to "/data/y.txt", not "/tmp/y.txt"`, `set path to "/data/x.txt", not "/tmp/x.txt"`, false},
		{`set path to "/a"`, `set path to "/a"`, false},
	}
	for _, c := range cases {
		if got := contradicts(c.newer, c.older); got != c.want {
			t.Errorf("contradicts(%q, %q) = %v, want %v", c.newer, c.older, got, c.want)
		}
	}
}

// rulesLesson is the lesson the rule-based reflector writes about a city
// rejected by get_weather, quoting tpl as its error template.
func rulesLesson(task, tpl string, conf float64) hindsight.Experience {
	return hindsight.Experience{
		Tool: "get_weather", Server: "weather", ErrorCode: "404", ErrorTemplate: tpl,
		Situation:  situation("get_weather", "404", tpl),
		Action:     "changed city, and called get_weather again",
		Result:     "get_weather succeeded on the next call",
		Lesson:     "When get_weather fails with `" + tpl + "`: the city value was rejected; pass a different, valid city.",
		Confidence: conf, Origin: "rules", SourceTask: task, SourceSteps: []int{0, 2},
	}
}

// Two templates of one error that agree token by token but share few
// words.
const (
	farWords     = "unknown city Pariss near Lyon Rhone valley in region northwest europe zone alpha bravo shard seventeen replica three primary quorum lost"
	farWildcards = "unknown city <*> near <*> <*> <*> in region <*> <*> zone <*> <*> shard <*> replica <*> <*> quorum <*>"
)

// mergeAcrossTasks: the same rules lesson learned in several tasks, its
// templates agreeing where one of them has a wildcard, is one experience
// counting every task once, quoting the most general template.
func mergeAcrossTasks(t *testing.T, b backend) {
	const (
		eu      = "unknown city <*> in region eu"
		pariss  = "unknown city Pariss in region <*>"
		general = "unknown city <*> in region <*>"
	)
	cases := []struct {
		name     string
		in       []hindsight.Experience
		evidence int
		tpl      string
		conf     float64
		outcomes []string
	}{
		{"three tasks, general last", []hindsight.Experience{
			rulesLesson("t1", eu, singlePrior), rulesLesson("t2", pariss, singlePrior), rulesLesson("t3", general, singlePrior),
		}, 3, general, Confidence(3, 0, false), []string{Added, Reinforced, Reinforced}},
		{"three tasks, general first", []hindsight.Experience{
			rulesLesson("t1", general, singlePrior), rulesLesson("t2", eu, singlePrior), rulesLesson("t3", pariss, singlePrior),
		}, 3, general, Confidence(3, 0, false), []string{Added, Reinforced, Reinforced}},
		{"three tasks, one unambiguous", []hindsight.Experience{
			rulesLesson("t1", eu, singlePrior), rulesLesson("t2", general, unambiguousPrior), rulesLesson("t3", pariss, singlePrior),
		}, 3, general, Confidence(3, 0, true), []string{Added, Reinforced, Reinforced}},
		// The same task again (a retried reflection) is no new evidence,
		// even with another template.
		{"same task twice", []hindsight.Experience{
			rulesLesson("t1", eu, singlePrior), rulesLesson("t1", general, singlePrior),
		}, 1, general, singlePrior, []string{Added, Reinforced}},
		// Agreeing templates make the same lesson even when their words
		// differ too much for the texts to be near-duplicates.
		{"agreeing templates, words far apart", []hindsight.Experience{
			rulesLesson("t1", farWords, singlePrior),
			rulesLesson("t2", farWildcards, singlePrior),
		}, 2, farWildcards, Confidence(2, 0, false), []string{Added, Reinforced}},
		{"same task, same template", []hindsight.Experience{
			rulesLesson("t1", eu, singlePrior), rulesLesson("t1", eu, singlePrior),
		}, 1, eu, singlePrior, []string{Added, Reinforced}},
	}
	// The far-apart pair is the same lesson by its templates alone.
	x, y := rulesLesson("t1", farWords, singlePrior), rulesLesson("t2", farWildcards, singlePrior)
	if vs, _ := b.emb.Embed(context.Background(), []string{storepkg.Text(&x), storepkg.Text(&y)}); storepkg.Cosine(vs[0], vs[1]) >= DefaultDuplicateThreshold {
		t.Fatalf("far-apart test texts are near-duplicates: cosine %.3f", storepkg.Cosine(vs[0], vs[1]))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store := b.open(t)
			mg := &Merger{Store: store, Embedder: b.emb}
			var ids []string
			for i, e := range c.in {
				res, err := mg.Merge(ctx, time.Now(), []hindsight.Experience{e})
				if err != nil || len(res) != 1 {
					t.Fatalf("merge %d: %+v %v", i, res, err)
				}
				if res[0].Outcome != c.outcomes[i] {
					t.Errorf("merge %d (%s, %q): %s, want %s", i, e.SourceTask, e.ErrorTemplate, res[0].Outcome, c.outcomes[i])
				}
				ids = append(ids, res[0].ID)
			}
			for _, id := range ids[1:] {
				if id != ids[0] {
					t.Errorf("merged into %v, want one experience", ids)
				}
			}
			live, all := liveAndAll(t, store)
			if len(live) != 1 || len(all) != 1 {
				t.Fatalf("%d live, %d in all, want 1 and 1: %+v", len(live), len(all), all)
			}
			got := live[0]
			if got.EvidenceCount != c.evidence {
				t.Errorf("evidence %d, want %d", got.EvidenceCount, c.evidence)
			}
			if got.ErrorTemplate != c.tpl {
				t.Errorf("template %q, want the most general %q", got.ErrorTemplate, c.tpl)
			}
			if !strings.Contains(got.Lesson, "`"+c.tpl+"`") || !strings.Contains(got.Situation, "`"+c.tpl+"`") {
				t.Errorf("lesson %q, situation %q do not quote %q", got.Lesson, got.Situation, c.tpl)
			}
			if got.Confidence != c.conf {
				t.Errorf("confidence %v, want %v", got.Confidence, c.conf)
			}
		})
	}
}

// mergeRetriedTask: a task reflected again after another task reinforced
// the experience is no new evidence either, though the stored SourceTask
// only follows the task whose wording was kept: t2 counts once (evidence
// 2), as Pipeline.Process promises that merging one task is idempotent.
func mergeRetriedTask(t *testing.T, b backend) {
	ctx := context.Background()
	store := b.open(t)
	mg := &Merger{Store: store, Embedder: b.emb}
	for _, e := range []hindsight.Experience{
		rulesLesson("t1", "unknown city <*> in region eu", singlePrior),
		rulesLesson("t2", "unknown city <*> in region eu", singlePrior),
		rulesLesson("t2", "unknown city <*> in region eu", singlePrior),
	} {
		if _, err := mg.Merge(ctx, time.Now(), []hindsight.Experience{e}); err != nil {
			t.Fatal(err)
		}
	}
	live, _ := liveAndAll(t, store)
	if len(live) != 1 || live[0].EvidenceCount != 2 || live[0].Confidence != Confidence(2, 0, false) {
		t.Fatalf("after t1, t2 and t2 again: %+v, want one experience of evidence 2", live)
	}
}

// mergeTemplatesDisagree: the same fix for errors whose templates do not
// agree is two lessons, however alike their words: texts that differ only
// in their quoted templates have a cosine above DefaultDuplicateThreshold,
// and counting one as evidence for the other would lift both over the
// injection gate and lose a template.
func mergeTemplatesDisagree(t *testing.T, b backend) {
	cases := []struct {
		name string
		a, b string
	}{
		{"other words", "unknown city <*> in region eu", "unknown city <*> in region us"},
		{"other length", "unknown city <*> in region eu", "unknown city <*>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store := b.open(t)
			mg := &Merger{Store: store, Embedder: b.emb}
			x, y := rulesLesson("t1", c.a, singlePrior), rulesLesson("t2", c.b, singlePrior)
			if templatesAgree(c.a, c.b) {
				t.Fatalf("test templates %q and %q agree", c.a, c.b)
			}
			res, err := mg.Merge(ctx, time.Now(), []hindsight.Experience{x, y})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Outcome != Added {
					t.Errorf("outcomes %+v, want both added", res)
				}
			}
			live, _ := liveAndAll(t, store)
			if len(live) != 2 {
				t.Fatalf("%d live experiences, want 2", len(live))
			}
			for _, e := range live {
				if e.EvidenceCount != 1 || e.Confidence != singlePrior {
					t.Errorf("%q: evidence %d confidence %v, want 1 and %v", e.ErrorTemplate, e.EvidenceCount, e.Confidence, singlePrior)
				}
			}
		})
	}
}

var mergeTests = []struct {
	name string
	fn   func(*testing.T, backend)
}{
	{"Duplicate", mergeDuplicate},
	{"Distinct", mergeDistinct},
	{"Supersede", mergeSupersede},
	{"AcrossTasks", mergeAcrossTasks},
	{"TemplatesDisagree", mergeTemplatesDisagree},
	{"RetriedTask", mergeRetriedTask},
	{"OtherServer", mergeOtherServer},
}

// mergeOtherServer: the same lesson learnt on another server of the
// namespace is that server's own experience, not a reinforcement of the
// first server's (whose sidecars alone would be told it).
func mergeOtherServer(t *testing.T, b backend) {
	ctx := context.Background()
	store := b.open(t)
	mg := &Merger{Store: store, Embedder: b.emb}
	const sit, lesson = "list_orders fails with 401 Unauthorized before login", "Call login before list_orders; without it list_orders fails with 401."
	first, second := exp("t1", 0.7, sit, lesson, 2, 4), exp("t2", 0.7, sit, lesson, 2, 4)
	second.Server = "shop-eu"
	for _, e := range []hindsight.Experience{first, second} {
		res, err := mg.Merge(ctx, time.Now(), []hindsight.Experience{e})
		if err != nil || len(res) != 1 || res[0].Outcome != Added {
			t.Fatalf("merge of %s's lesson: %+v, %v; want it added", e.Server, res, err)
		}
	}
	live, _ := liveAndAll(t, store)
	servers := map[string]int{}
	for _, e := range live {
		servers[e.Server] = e.EvidenceCount
	}
	if len(live) != 2 || servers["shop"] != 1 || servers["shop-eu"] != 1 {
		t.Fatalf("live experiences by server and evidence: %v, want shop and shop-eu with 1 each", servers)
	}
}

// runMergeTests runs the dedupe and supersede tests against b.
func runMergeTests(t *testing.T, b backend) {
	for _, mt := range mergeTests {
		t.Run(mt.name, func(t *testing.T) { mt.fn(t, b) })
	}
}

func TestMerge(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { runMergeTests(t, b) })
	}
}
