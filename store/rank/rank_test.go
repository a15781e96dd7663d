package rank

import (
	"math"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

var now = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func exp(id string, mod func(*hindsight.Experience)) *hindsight.Experience {
	e := &hindsight.Experience{ID: id, Namespace: "default", Server: "fs", Tool: "read_file", TaskType: "edit",
		ErrorCode: "ENOENT", Confidence: 0.8, CreatedAt: now.Add(-24 * time.Hour), UpdatedAt: now.Add(-24 * time.Hour)}
	if mod != nil {
		mod(e)
	}
	return e
}

func TestMatch(t *testing.T) {
	var o Options
	for _, tc := range []struct {
		name string
		q    hindsight.Query
		e    *hindsight.Experience
		want bool
	}{
		{"all empty", hindsight.Query{}, exp("a", nil), true},
		{"namespace default", hindsight.Query{Namespace: "default"}, exp("a", func(e *hindsight.Experience) { e.Namespace = "" }), true},
		{"other namespace", hindsight.Query{Namespace: "b"}, exp("a", nil), false},
		{"server", hindsight.Query{Server: "git"}, exp("a", nil), false},
		{"tool", hindsight.Query{Tool: "read_file"}, exp("a", nil), true},
		{"task type", hindsight.Query{TaskType: "deploy"}, exp("a", nil), false},
		{"error code", hindsight.Query{ErrorCode: "EACCES"}, exp("a", nil), false},
		{"superseded", hindsight.Query{}, exp("a", func(e *hindsight.Experience) { e.SupersededBy = "b" }), false},
		{"superseded asked", hindsight.Query{IncludeSuperseded: true}, exp("a", func(e *hindsight.Experience) { e.SupersededBy = "b" }), true},
		{"deleted", hindsight.Query{}, exp("a", func(e *hindsight.Experience) { e.Deleted = true }), false},
		{"deleted asked", hindsight.Query{IncludeDeleted: true}, exp("a", func(e *hindsight.Experience) { e.Deleted = true }), true},
		{"cold", hindsight.Query{}, exp("a", func(e *hindsight.Experience) { e.CreatedAt = now.Add(-181 * 24 * time.Hour) }), false},
		{"cold asked", hindsight.Query{IncludeCold: true}, exp("a", func(e *hindsight.Experience) { e.CreatedAt = now.Add(-181 * 24 * time.Hour) }), true},
		{"old but hit", hindsight.Query{}, exp("a", func(e *hindsight.Experience) {
			e.CreatedAt = now.Add(-400 * 24 * time.Hour)
			h := now.Add(-time.Hour)
			e.LastHitAt = &h
		}), true},
	} {
		if got := o.Match(&tc.q, tc.e, now); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestScore(t *testing.T) {
	var o Options
	base := Candidate{Exp: exp("a", nil), BM25Rank: 1, VectorRank: 1}
	s0, ex := o.Score(base, now, true)
	if want := 2.0 / 61; math.Abs(ex.RRF-want) > 1e-12 { // zero Options: both arms weigh 1
		t.Fatalf("RRF = %v, want %v", ex.RRF, want)
	}
	if s0 <= 0 || ex.Cold != 1 {
		t.Fatalf("score %v explain %+v", s0, ex)
	}
	// Each weight moves the score the way it should.
	for _, tc := range []struct {
		name   string
		mod    func(*hindsight.Experience)
		better bool
	}{
		{"more confident", func(e *hindsight.Experience) { e.Confidence = 1 }, true},
		{"less confident", func(e *hindsight.Experience) { e.Confidence = 0.1 }, false},
		{"older update", func(e *hindsight.Experience) { e.UpdatedAt = now.Add(-200 * 24 * time.Hour) }, false},
		{"more evidence", func(e *hindsight.Experience) { e.EvidenceCount = 10 }, true},
		{"more hits", func(e *hindsight.Experience) { e.HitCount = 50 }, true},
		{"stale", func(e *hindsight.Experience) { e.CreatedAt = now.Add(-100 * 24 * time.Hour) }, false},
	} {
		c := base
		c.Exp = exp("b", tc.mod)
		s, _ := o.Score(c, now, false)
		if (s > s0) != tc.better || s == s0 {
			t.Errorf("%s: score %v vs base %v", tc.name, s, s0)
		}
	}
	// Scoring with the default weights of each embedder is tested in
	// TestPriorsStayGentle.
	// Half-life per task type.
	o2 := Options{HalfLifeByTaskType: map[string]time.Duration{"edit": time.Hour}}
	c := Candidate{Exp: exp("h", nil), BM25Rank: 1}
	_, e1 := o.Score(c, now, true)
	_, e2 := o2.Score(c, now, true)
	if e2.Recency >= e1.Recency {
		t.Errorf("short half-life recency %v >= default %v", e2.Recency, e1.Recency)
	}
}

func TestFuse(t *testing.T) {
	var o Options
	cands := []Candidate{
		{Exp: exp("c", nil), BM25Rank: 3},
		{Exp: exp("a", nil), BM25Rank: 1, VectorRank: 2},
		{Exp: exp("b", nil), VectorRank: 1},
		{Exp: exp("d", nil), BM25Rank: 2},
	}
	res := o.Fuse(&hindsight.Query{K: 3}, cands, now)
	if len(res) != 3 || res[0].ID != "a" || res[1].ID != "b" || res[2].ID != "d" {
		ids := []string{}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
		t.Fatalf("Fuse = %v, want [a b d]", ids)
	}
	if res[0].Explain != nil {
		t.Fatal("explain without asking")
	}
	if got := o.Fuse(&hindsight.Query{Explain: true}, cands, now); len(got) != 4 || got[0].Explain == nil {
		t.Fatalf("Fuse(k=0) = %d results", len(got))
	}
}

func TestVectorWeightFor(t *testing.T) {
	for _, tc := range []struct {
		embedder string
		want     float64
	}{
		{"hindsight-hash-v1", HashVectorWeight},
		{"hindsight-hash-v1/512", HashVectorWeight},
		{"hindsight-hash-v2/256", HashVectorWeight},
		{"text-embedding-3-small", 1},
		{"text-embedding-3-small/1536", 1},
		{"nomic-embed-text", 1},
		{"", 1},
	} {
		if got := VectorWeightFor(tc.embedder); got != tc.want {
			t.Errorf("VectorWeightFor(%q) = %v, want %v", tc.embedder, got, tc.want)
		}
	}
	if HashVectorWeight <= 0 || HashVectorWeight >= 1 {
		t.Errorf("HashVectorWeight %v: the hashing embedder must weigh less than BM25", HashVectorWeight)
	}
	// ForEmbedder fills the vector weight only when it is not set.
	if b, v := (Options{}).ForEmbedder("hindsight-hash-v1/512").ArmWeights(); b != 1 || v != HashVectorWeight {
		t.Errorf("ForEmbedder(hash) weights %v %v", b, v)
	}
	if _, v := (Options{VectorWeight: 0.7}).ForEmbedder("hindsight-hash-v1/512").ArmWeights(); v != 0.7 {
		t.Errorf("ForEmbedder replaced a configured weight: %v", v)
	}
	if b, v := (Options{}).ArmWeights(); b != 1 || v != 1 {
		t.Errorf("zero Options weights %v %v, want 1 1", b, v)
	}
}

func TestWeightedRRF(t *testing.T) {
	o := Options{BM25Weight: 1, VectorWeight: 0.3, TemplateWeight: -1}
	for _, tc := range []struct {
		c    Candidate
		want float64
	}{
		{Candidate{BM25Rank: 1, VectorRank: 1}, 1.0/61 + 0.3/61},
		{Candidate{BM25Rank: 3}, 1.0 / 63},
		{Candidate{VectorRank: 3}, 0.3 / 63},
		{Candidate{BM25Rank: 2, VectorRank: 5, Template: true}, 1.0/62 + 0.3/65}, // template arm off
	} {
		tc.c.Exp = exp("a", nil)
		if _, ex := o.Score(tc.c, now, true); math.Abs(ex.RRF-tc.want) > 1e-12 {
			t.Errorf("%+v: RRF %v, want %v", tc.c, ex.RRF, tc.want)
		}
	}
	c := Candidate{Exp: exp("a", nil), BM25Rank: 2, Template: true}
	if _, ex := (Options{}).Score(c, now, true); math.Abs(ex.RRF-(1.0/62+DefaultTemplateWeight/61)) > 1e-12 {
		t.Errorf("template arm: RRF %v", ex.RRF)
	}
}

func TestTemplateMatch(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"payment of <*> declined: card <*> expired", "payment of <*> declined: card <*> expired", true},
		{"payment of <*> declined: card <*> expired", "payment of 12.00 declined: card 4242 expired", true},
		{"payment of 12.00 declined: card <*> expired", "payment of <*> declined: card 4242 expired", true}, // wildcards on both sides
		{"currency <*> does not match the charge currency <*>", "currency EUR does not match the charge currency USD", true},
		{"Currency <*> does not match", "currency eur DOES NOT match", true},
		{"pickup window <*>-<*> is too short", "pickup window <*> is too short", true},
		{"insufficient stock for <*>: requested <*>", "insufficient stock for <*>: requested 5", true},
		{"insufficient stock for <*>: requested <*>", "insufficient stock for SKU-1: requested 5", true},
		{"insufficient stock for <*>: requested <*>", "insufficient stock for SKU-1 requested 5", false}, // "<*>:" needs the colon
		{"id=<*> not found", "id=42 not found", true},
		{"id=<*> not found", "key=42 not found", false},
		{"id=<*>ms not found", "id=42s not found", false},
		{"<*>-<*> window", "a<*>-<*>b window", true},
		{"<*>x window", "y<*> window", true}, // "yx"
		{"a<*> window", "b<*> window", false},
		{"<*>a window", "<*>b window", false},
		{"missing required argument: currency", "missing required argument: amount", false},
		{"refund amount <*> exceeds captured amount <*>", "refund amount <*> exceeds remaining refundable amount <*>", false}, // token count
		{"payment method <*> expired", "payment method <*> expired now", false},
		{"<*>", "anything", false},                      // nothing literal
		{"<*> <*>", "disk full", false},                 // nothing literal
		{"", "", false},                                 // no template
		{"payment failed", "", false},                   // experience about no error
		{"  payment   failed ", "payment failed", true}, // whitespace
	} {
		if got := TemplateMatch(tc.a, tc.b); got != tc.want {
			t.Errorf("TemplateMatch(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := TemplateMatch(tc.b, tc.a); got != tc.want {
			t.Errorf("TemplateMatch(%q, %q) = %v, want %v (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
}

// worstHot and bestHot are the extremes of metadata of a hot experience.
func worstHot(id string) *hindsight.Experience {
	return exp(id, func(e *hindsight.Experience) {
		e.Confidence, e.EvidenceCount, e.HitCount = 0, 0, 0
		e.CreatedAt = now.Add(-1000 * 24 * time.Hour)
		e.UpdatedAt = e.CreatedAt
		hit := now.Add(-time.Hour) // hit lately: hot, but not updated for years
		e.LastHitAt = &hit
	})
}

func bestHot(id string) *hindsight.Experience {
	return exp(id, func(e *hindsight.Experience) {
		e.Confidence, e.EvidenceCount, e.HitCount, e.UpdatedAt = 1, 1000, 100000, now
	})
}

// TestPriorsStayGentle checks, for each embedder's weights, that metadata
// cannot outrank a clearly better text match: first in both lists with
// the worst metadata of a hot experience beats tenth in both with the best.
func TestPriorsStayGentle(t *testing.T) {
	for _, emb := range []string{"hindsight-hash-v1/512", "text-embedding-3-small/1536"} {
		o := Options{}.ForEmbedder(emb)
		first := Candidate{Exp: worstHot("first"), BM25Rank: 1, VectorRank: 1}
		tenth := Candidate{Exp: bestHot("tenth"), BM25Rank: 10, VectorRank: 10}
		if o.Cold(first.Exp, now) {
			t.Fatal("worst hot experience is cold")
		}
		sf, ef := o.Score(first, now, true)
		st, _ := o.Score(tenth, now, true)
		if sf <= st {
			t.Errorf("%s: first in both with poor metadata %v <= tenth in both with the best %v", emb, sf, st)
		}
		if ef.Cold != 1 {
			t.Errorf("%s: worst hot experience weighed as stale: %+v", emb, ef)
		}
		res := o.Fuse(&hindsight.Query{K: 2}, []Candidate{tenth, first}, now)
		if res[0].ID != "first" {
			t.Errorf("%s: Fuse put %s first", emb, res[0].ID)
		}
		// Metadata still decides between equals.
		a := Candidate{Exp: worstHot("a"), BM25Rank: 2, VectorRank: 2}
		b := Candidate{Exp: bestHot("b"), BM25Rank: 2, VectorRank: 2}
		if sa, sb := func() (float64, float64) {
			x, _ := o.Score(a, now, false)
			y, _ := o.Score(b, now, false)
			return x, y
		}(); sb <= sa {
			t.Errorf("%s: better metadata at equal ranks %v <= %v", emb, sb, sa)
		}
	}
}

// TestTemplateSignal checks that a matching error template lifts an
// experience over an otherwise equal one a rank better, but not over a
// clearly better text match, and that Fuse reads it from the query.
func TestTemplateSignal(t *testing.T) {
	const tmpl = "refund amount <*> exceeds captured amount <*>"
	same := func(id string) *hindsight.Experience {
		return exp(id, func(e *hindsight.Experience) { e.ErrorTemplate = tmpl })
	}
	other := func(id string) *hindsight.Experience {
		return exp(id, func(e *hindsight.Experience) { e.ErrorTemplate = "charge <*> has already been refunded" })
	}
	q := &hindsight.Query{ErrorTemplate: "refund amount 12.00 exceeds captured amount 9.50", K: 5}
	for _, emb := range []string{"hindsight-hash-v1/512", "text-embedding-3-small/1536"} {
		o := Options{}.ForEmbedder(emb)
		for _, tc := range []struct {
			name    string
			cands   []Candidate
			wantTop string
		}{
			{"lifts over the next rank", []Candidate{
				{Exp: other("better"), BM25Rank: 1, VectorRank: 1},
				{Exp: same("match"), BM25Rank: 2, VectorRank: 2}}, "match"},
			{"lifts over a few ranks in one list", []Candidate{
				{Exp: other("better"), BM25Rank: 1},
				{Exp: same("match"), BM25Rank: 4}}, "match"},
			{"not over first in both from tenth", []Candidate{
				{Exp: other("better"), BM25Rank: 1, VectorRank: 1},
				{Exp: same("match"), BM25Rank: 10, VectorRank: 10}}, "better"},
			{"no template in the query", nil, "better"},
		} {
			qq := q
			cands := tc.cands
			if cands == nil {
				qq = &hindsight.Query{K: 5}
				cands = []Candidate{{Exp: other("better"), BM25Rank: 1, VectorRank: 1}, {Exp: same("match"), BM25Rank: 2, VectorRank: 2}}
			}
			res := o.Fuse(qq, cands, now)
			if res[0].ID != tc.wantTop {
				t.Errorf("%s, %s: %s first, want %s", emb, tc.name, res[0].ID, tc.wantTop)
			}
		}
		// Off when TemplateWeight is negative.
		off := o
		off.TemplateWeight = -1
		res := off.Fuse(q, []Candidate{{Exp: other("better"), BM25Rank: 1, VectorRank: 1}, {Exp: same("match"), BM25Rank: 2, VectorRank: 2}}, now)
		if res[0].ID != "better" {
			t.Errorf("%s: template arm off, %s first", emb, res[0].ID)
		}
	}
}
