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
	if want := 2.0 / 61; math.Abs(ex.RRF-want) > 1e-12 {
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
	// Relevance dominates: first in both lists with the worst metadata of
	// a hot experience still beats eleventh in both with the best.
	worst := Candidate{Exp: exp("w", func(e *hindsight.Experience) {
		e.Confidence = 0
		e.CreatedAt = now.Add(-89 * 24 * time.Hour)
		e.UpdatedAt = e.CreatedAt
	}), BM25Rank: 1, VectorRank: 1}
	best := Candidate{Exp: exp("b", func(e *hindsight.Experience) {
		e.Confidence, e.EvidenceCount, e.HitCount, e.UpdatedAt = 1, 1000, 100000, now
	}), BM25Rank: 11, VectorRank: 11}
	sw, _ := o.Score(worst, now, false)
	sb, _ := o.Score(best, now, false)
	if sw <= sb {
		t.Errorf("rank 1/1 with poor metadata %v <= rank 5/5 with the best %v", sw, sb)
	}
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
	res := o.Fuse(cands, now, 3, false)
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
	if got := o.Fuse(cands, now, 0, true); len(got) != 4 || got[0].Explain == nil {
		t.Fatalf("Fuse(k=0) = %d results", len(got))
	}
}
