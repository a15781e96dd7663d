// Package rank is the ranking both experience store backends apply after
// retrieval: filter first, fuse the lexical (BM25) and vector ranks with
// reciprocal-rank fusion, then weight by confidence, recency, evidence, hits
// and staleness.
//
// The score of an experience is
//
//	RRF × confidence × recency × evidence × hits × cold
//
// where RRF = Σ 1/(K + rank) over the BM25 and vector rankings it appears in
// (K = 60), confidence = 0.95 + 0.05·c, recency = 0.95 + 0.05·2^(−age/half-life)
// (age since UpdatedAt), evidence = 1 + 0.01·ln(1 + evidence count), hits =
// 1 + 0.005·ln(1 + hit count) (both counts capped at 100), and cold = 1, or StaleWeight (0.9) when the
// experience has not been hit (or, never hit, created) for StaleAfter (90
// days), or ColdWeight (0.8) once it is cold (ColdAfter, 180 days). Cold
// experiences leave the hot index: searches skip them unless
// Query.IncludeCold; a hit (RecordHits) or an update brings one back.
//
// RRF with K = 60 is flat: being first in both lists instead of second is
// worth only 1.6%. The weights are therefore kept to a few percent each, so
// that they reorder matches of about equal relevance (a confident, fresh,
// proven lesson beats an unproven one a few ranks higher) but never bury
// the clearly best match: a hot experience first in both lists stays ahead
// of anything below tenth in both, whatever their metadata. Only
// staleness weighs more. The retrieval
// benchmark (store/testdata/retrieval) lost a third of its hit@1 with
// weights ten times larger.
package rank

import (
	"math"
	"sort"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// Defaults of Options.
const (
	DefaultRRFK       = 60
	DefaultHalfLife   = 90 * 24 * time.Hour
	DefaultStaleAfter = 90 * 24 * time.Hour
	DefaultColdAfter  = 180 * 24 * time.Hour
	DefaultK          = 5
	// StaleWeight and ColdWeight multiply the score of experiences not
	// hit for StaleAfter and ColdAfter.
	StaleWeight = 0.9
	ColdWeight  = 0.8
	// Candidates is how many results each retriever (BM25, vector) hands
	// to fusion.
	Candidates = 100
)

// Options tune ranking. The zero value uses the defaults.
type Options struct {
	RRFK     float64
	HalfLife time.Duration
	// HalfLifeByTaskType overrides HalfLife for experiences of a task type
	// (the "kind" of lesson: some go stale faster than others).
	HalfLifeByTaskType map[string]time.Duration
	StaleAfter         time.Duration
	ColdAfter          time.Duration
}

func (o Options) withDefaults() Options {
	if o.RRFK <= 0 {
		o.RRFK = DefaultRRFK
	}
	if o.HalfLife <= 0 {
		o.HalfLife = DefaultHalfLife
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.ColdAfter <= 0 {
		o.ColdAfter = DefaultColdAfter
	}
	return o
}

// LastActive is when e was last hit, or created if it never was.
func LastActive(e *hindsight.Experience) time.Time {
	// Editing is not use: an edited but never hit experience counts from
	// its creation.
	if e.LastHitAt != nil && e.LastHitAt.After(e.CreatedAt) {
		return *e.LastHitAt
	}
	return e.CreatedAt
}

// Cold reports whether e has left the hot index at now.
func (o Options) Cold(e *hindsight.Experience, now time.Time) bool {
	o = o.withDefaults()
	return now.Sub(LastActive(e)) >= o.ColdAfter
}

// Namespace returns the namespace a query or experience field means.
func Namespace(ns string) string {
	if ns == "" {
		return hindsight.DefaultNamespace
	}
	return ns
}

// Match reports whether e passes q's exact filters and state rules
// (superseded, deleted, cold) at now.
func (o Options) Match(q *hindsight.Query, e *hindsight.Experience, now time.Time) bool {
	switch {
	case Namespace(e.Namespace) != Namespace(q.Namespace):
		return false
	case q.Server != "" && e.Server != q.Server:
		return false
	case q.Tool != "" && e.Tool != q.Tool:
		return false
	case q.TaskType != "" && e.TaskType != q.TaskType:
		return false
	case q.ErrorCode != "" && e.ErrorCode != q.ErrorCode:
		return false
	case e.SupersededBy != "" && !q.IncludeSuperseded:
		return false
	case e.Deleted && !q.IncludeDeleted:
		return false
	case !q.IncludeCold && o.Cold(e, now):
		return false
	}
	return true
}

// Candidate is an experience found by retrieval with its 1-based ranks in
// the BM25 and vector result lists (0: not in that list).
type Candidate struct {
	Exp        *hindsight.Experience
	BM25Rank   int
	VectorRank int
}

// Score returns the final score of c at now and, when explain is true, how
// it was made.
func (o Options) Score(c Candidate, now time.Time, explain bool) (float64, *hindsight.ScoreExplain) {
	o = o.withDefaults()
	e := c.Exp
	var rrf float64
	if c.BM25Rank > 0 {
		rrf += 1 / (o.RRFK + float64(c.BM25Rank))
	}
	if c.VectorRank > 0 {
		rrf += 1 / (o.RRFK + float64(c.VectorRank))
	}
	conf := math.Min(math.Max(e.Confidence, 0), 1)
	confW := 0.95 + 0.05*conf
	hl := o.HalfLife
	if h, ok := o.HalfLifeByTaskType[e.TaskType]; ok && h > 0 {
		hl = h
	}
	age := now.Sub(e.UpdatedAt)
	if e.UpdatedAt.IsZero() || age < 0 {
		age = 0
	}
	recW := 0.95 + 0.05*math.Exp2(-float64(age)/float64(hl))
	evW := 1 + 0.01*math.Log1p(float64(min(max(e.EvidenceCount, 0), 100)))
	hitW := 1 + 0.005*math.Log1p(float64(min(max(e.HitCount, 0), 100)))
	coldW := 1.0
	switch idle := now.Sub(LastActive(e)); {
	case idle >= o.ColdAfter:
		coldW = ColdWeight
	case idle >= o.StaleAfter:
		coldW = StaleWeight
	}
	score := rrf * confW * recW * evW * hitW * coldW
	if !explain {
		return score, nil
	}
	return score, &hindsight.ScoreExplain{
		BM25Rank: c.BM25Rank, VectorRank: c.VectorRank, RRF: rrf,
		Confidence: confW, Recency: recW, Evidence: evW, Hits: hitW, Cold: coldW,
	}
}

// Fuse scores cands (already filtered with Match) and returns the best k
// (DefaultK when k <= 0), best first. Ties go to the better BM25 rank, then
// the id, so results are deterministic.
func (o Options) Fuse(cands []Candidate, now time.Time, k int, explain bool) []hindsight.ScoredExperience {
	if k <= 0 {
		k = DefaultK
	}
	out := make([]hindsight.ScoredExperience, 0, len(cands))
	for _, c := range cands {
		s, ex := o.Score(c, now, explain)
		se := hindsight.ScoredExperience{Experience: *c.Exp, Score: s, Explain: ex}
		out = append(out, se)
	}
	ranks := make(map[string]int, len(cands))
	for _, c := range cands {
		r := c.BM25Rank
		if r == 0 {
			r = math.MaxInt32
		}
		ranks[c.Exp.ID] = r
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		if ri, rj := ranks[out[i].ID], ranks[out[j].ID]; ri != rj {
			return ri < rj
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > k {
		out = out[:k]
	}
	return out
}
