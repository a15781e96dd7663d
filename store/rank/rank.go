// Package rank is the ranking both experience store backends apply after
// retrieval: filter first, fuse the lexical (BM25) and vector ranks and the
// query's error template with weighted reciprocal-rank fusion, then weight
// by confidence, recency, evidence, hits and staleness.
//
// The score of an experience is
//
//	fused × confidence × recency × evidence × hits × cold
//
// where fused = w_bm25/(K + bm25 rank) + w_vec/(K + vector rank) +
// w_tmpl/(K + 1) (K = 60; an arm the experience is not in adds nothing, and
// the template arm counts only when the query carries an error template
// that TemplateMatch accepts for the experience's), confidence = 0.97 +
// 0.03·c, recency = 0.97 + 0.03·2^(−age/half-life) (age since UpdatedAt),
// evidence = 1 + 0.01·ln(1 + evidence count), hits = 1 + 0.005·ln(1 + hit
// count) (both counts capped at 100), and cold = 1, or StaleWeight (0.9)
// when the experience has not been hit (or, never hit, created) for
// StaleAfter (90 days), or ColdWeight (0.8) once it is cold (ColdAfter, 180
// days). Cold experiences leave the hot index: searches skip them unless
// Query.IncludeCold; a hit (RecordHits) or an update brings one back.
//
// # Arm weights
//
// BM25 weighs 1. The vector arm weighs what VectorWeightFor says for the
// embedder that made the vectors: HashVectorWeight (0.3) for store/embed's
// local hashing embedder ("hindsight-hash-…"), whose vectors are bags of
// hashed words and trigrams — a noisier copy of the lexical signal, not a
// second opinion — and 1 for any other embedder (an embedding model, which
// knows that "permission denied" and EACCES mean the same thing). With
// equal weights the hashing arm outvoted BM25 on hard negatives (same tool
// and situation, another error) and fused hit@3 fell below BM25's alone.
// The weight was chosen by measuring both retrieval benchmarks
// (store/testdata/retrieval; its README has the figures and the command)
// over weights 0.2–1: from 0.2 to 0.4 the fusion's hit@3 is at least
// BM25's alone on both sets, with and without filters; at 0.3 the main
// set's hit@1 stays about BM25's and the hard set keeps most of what the
// vector arm adds there.
//
// The template arm weighs TemplateWeight (DefaultTemplateWeight, 0.15): a
// matching template adds w_tmpl/(K+1) ≈ 0.0025. That is more than
// separates neighbouring ranks near the top (first and second in both
// lists differ by ≈ 0.0003 with the hashing embedder's weights, ≈ 0.0005
// with a model's) and less than separates first in both lists from tenth
// in both (≈ 0.0027 and ≈ 0.0042), so it reorders experiences about
// equally relevant to the query's text in favour of the one about the same
// error, and cannot lift a poor text match over a clearly better one.
// Measured on the hard-negative set it lifts hit@1; larger weights gained
// nothing more.
//
// Query.ErrorCode is a filter (Match), not a signal: an experience's error
// code is part of its indexed text, so BM25 already rewards one whose code
// the query's text names.
//
// # Priors
//
// RRF with K = 60 is flat: being first in both lists instead of second is
// worth only 1.6%. The metadata weights are therefore kept to a few percent
// each, so that they reorder matches of about equal relevance (a confident,
// fresh, proven lesson beats an unproven one a few ranks higher) but never
// bury the clearly best match: together they span at most 14%, less than
// the 15% between first and tenth in both lists, so a hot experience first
// in both lists stays ahead of one tenth in both, whatever their metadata.
// Only staleness weighs more.
package rank

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/defaults"
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
	// HashVectorWeight is the vector arm's weight for the local hashing
	// embedder (see VectorWeightFor).
	HashVectorWeight = 0.3
	// DefaultTemplateWeight is the template arm's weight.
	DefaultTemplateWeight = 0.15
)

// hashEmbedder prefixes the names of store/embed's hashing embedders.
const hashEmbedder = "hindsight-hash-"

// VectorWeightFor returns the weight of the vector arm for vectors made by
// the named embedder (its Name, or store.EmbedderID's "name/dim"):
// HashVectorWeight for the local hashing embedder, 1 for any other (an
// embedding model).
func VectorWeightFor(embedder string) float64 {
	name, _, _ := strings.Cut(embedder, "/")
	if strings.HasPrefix(name, hashEmbedder) {
		return HashVectorWeight
	}
	return 1
}

// Options tune ranking. The zero value uses the defaults.
type Options struct {
	RRFK float64
	// BM25Weight and VectorWeight weigh the BM25 and vector arms of the
	// fusion; 0 (or less) means 1. Backends fill VectorWeight from their
	// embedder with ForEmbedder unless it is set.
	BM25Weight, VectorWeight float64
	// TemplateWeight weighs the error template arm: 0 means
	// DefaultTemplateWeight, a negative value turns the arm off.
	TemplateWeight float64
	HalfLife       time.Duration
	// HalfLifeByTaskType overrides HalfLife for experiences of a task type
	// (the "kind" of lesson: some go stale faster than others).
	HalfLifeByTaskType map[string]time.Duration
	StaleAfter         time.Duration
	ColdAfter          time.Duration
}

func (o Options) withDefaults() Options {
	o.RRFK = defaults.Positive(o.RRFK, DefaultRRFK)
	o.BM25Weight = defaults.Positive(o.BM25Weight, 1)
	o.VectorWeight = defaults.Positive(o.VectorWeight, 1)
	switch {
	case o.TemplateWeight == 0:
		o.TemplateWeight = DefaultTemplateWeight
	case o.TemplateWeight < 0:
		o.TemplateWeight = 0
	}
	o.HalfLife = defaults.Positive(o.HalfLife, DefaultHalfLife)
	o.StaleAfter = defaults.Positive(o.StaleAfter, DefaultStaleAfter)
	o.ColdAfter = defaults.Positive(o.ColdAfter, DefaultColdAfter)
	return o
}

// ForEmbedder returns o with VectorWeight set to VectorWeightFor(embedder)
// unless it is set already.
func (o Options) ForEmbedder(embedder string) Options {
	if o.VectorWeight <= 0 {
		o.VectorWeight = VectorWeightFor(embedder)
	}
	return o
}

// ArmWeights returns the BM25 and vector arms' weights, defaults applied.
func (o Options) ArmWeights() (bm25, vector float64) {
	o = o.withDefaults()
	return o.BM25Weight, o.VectorWeight
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
// the BM25 and vector result lists (0: not in that list). Template reports
// whether its error template matches the query's (Fuse sets it).
type Candidate struct {
	Exp        *hindsight.Experience
	BM25Rank   int
	VectorRank int
	Template   bool
}

// TemplateMatch reports whether error templates a and b (variable parts
// masked as <*>) describe the same error: both non-empty, the same number
// of whitespace-separated tokens, and each pair of tokens equal ignoring
// case, or matching with <*> standing for any text on either side (the
// token "<*>" matches any token, "id=<*>" matches "id=42"). At least one
// pair must be literal on both sides, so "<*>" matches nothing.
func TemplateMatch(a, b string) bool {
	ta, tb := strings.Fields(a), strings.Fields(b)
	if len(ta) == 0 || len(ta) != len(tb) {
		return false
	}
	literal := false
	for i := range ta {
		x, y := strings.ToLower(ta[i]), strings.ToLower(tb[i])
		if x == wildcard || y == wildcard {
			continue
		}
		if !tokenMatch(x, y) {
			return false
		}
		literal = true
	}
	return literal
}

const wildcard = "<*>"

// tokenMatch matches two tokens of which either or both may hold <*>.
func tokenMatch(x, y string) bool {
	wx, wy := strings.Contains(x, wildcard), strings.Contains(y, wildcard)
	switch {
	case !wx && !wy:
		return x == y
	case wx && !wy:
		return glob(strings.Split(x, wildcard), y)
	case !wx && wy:
		return glob(strings.Split(y, wildcard), x)
	}
	// Both masked: their literal heads and tails must agree.
	px, py := strings.Split(x, wildcard), strings.Split(y, wildcard)
	hx, hy := px[0], py[0]
	tx, ty := px[len(px)-1], py[len(py)-1]
	return (strings.HasPrefix(hx, hy) || strings.HasPrefix(hy, hx)) &&
		(strings.HasSuffix(tx, ty) || strings.HasSuffix(ty, tx))
}

// glob reports whether s is parts joined by any texts.
func glob(parts []string, s string) bool {
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// Score returns the final score of c at now and, when explain is true, how
// it was made (ScoreExplain.RRF is the fused sum, template arm included).
func (o Options) Score(c Candidate, now time.Time, explain bool) (float64, *hindsight.ScoreExplain) {
	o = o.withDefaults()
	e := c.Exp
	var rrf float64
	if c.BM25Rank > 0 {
		rrf += o.BM25Weight / (o.RRFK + float64(c.BM25Rank))
	}
	if c.VectorRank > 0 {
		rrf += o.VectorWeight / (o.RRFK + float64(c.VectorRank))
	}
	if c.Template {
		rrf += o.TemplateWeight / (o.RRFK + 1)
	}
	conf := math.Min(math.Max(e.Confidence, 0), 1)
	confW := 0.97 + 0.03*conf
	hl := o.HalfLife
	if h, ok := o.HalfLifeByTaskType[e.TaskType]; ok && h > 0 {
		hl = h
	}
	age := now.Sub(e.UpdatedAt)
	if e.UpdatedAt.IsZero() || age < 0 {
		age = 0
	}
	recW := 0.97 + 0.03*math.Exp2(-float64(age)/float64(hl))
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

// Fuse scores cands (already filtered with Match) for q and returns the
// best q.K (DefaultK when q.K <= 0), best first, explained when q.Explain.
// A candidate's Template is set from TemplateMatch(q.ErrorTemplate, its
// ErrorTemplate). Ties go to the better BM25 rank, then the id, so results
// are deterministic.
func (o Options) Fuse(q *hindsight.Query, cands []Candidate, now time.Time) []hindsight.ScoredExperience {
	k := q.K
	if k <= 0 {
		k = DefaultK
	}
	// Candidates are sorted as small records; only the best k are copied
	// out as experiences.
	type fused struct {
		c       int // index in cands
		score   float64
		explain *hindsight.ScoreExplain
	}
	all := make([]fused, 0, len(cands))
	for i, c := range cands {
		c.Template = q.ErrorTemplate != "" && TemplateMatch(q.ErrorTemplate, c.Exp.ErrorTemplate)
		s, ex := o.Score(c, now, q.Explain)
		all = append(all, fused{c: i, score: s, explain: ex})
	}
	ranks := make(map[string]int, len(cands))
	for _, c := range cands {
		r := c.BM25Rank
		if r == 0 {
			r = math.MaxInt32
		}
		ranks[c.Exp.ID] = r
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		a, b := cands[all[i].c].Exp.ID, cands[all[j].c].Exp.ID
		if ri, rj := ranks[a], ranks[b]; ri != rj {
			return ri < rj
		}
		return a < b
	})
	all = all[:min(len(all), k)]
	out := make([]hindsight.ScoredExperience, len(all))
	for i, f := range all {
		out[i] = hindsight.ScoredExperience{Experience: *cands[f.c].Exp, Score: f.score, Explain: f.explain}
	}
	return out
}
