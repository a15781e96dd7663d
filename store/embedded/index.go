package embedded

import (
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/hindsight-proxy/hindsight/store/tokenize"
)

// BM25 parameters (the usual Lucene defaults).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// doc is one slot of the index. A replaced or re-indexed experience leaves
// a dead slot behind; dead slots are skipped and dropped by compact.
type doc struct {
	filterMeta
	rankMeta
	length int32
	// sum identifies what the slot indexes of its experience (textSum),
	// so that a replayed write that changed none of it (a hit) updates
	// the slot in place.
	sum uint64
}

// filterMeta is what filters (and the vector scan) read of a doc. The
// index keeps a dense copy of each doc's in index.meta, so that filtering
// streams 32 bytes a slot.
type filterMeta struct {
	// interned filter values, compared as integers when filtering.
	ns, server, tool, task, code int32
	live, superseded, deleted    bool
	hasVec                       bool  // the slot has a vector of the store's embedder
	lastActive                   int64 // unix seconds, see rank.LastActive
}

// rankMeta is what ranking reads of an experience (rank.Options.Score and
// Fuse); the full record stays in Badger.
type rankMeta struct {
	id               string
	template         int32 // interned error template
	confidence       float64
	evidence, hits   int32
	created, updated time.Time
	lastHit          time.Time // zero: never hit
}

// index is the in-memory search structure of a Store: BM25 postings, the
// vectors quantised to int8 with a ternary bit code per vector for fast
// pre-selection, exact-match filter lists and the fields ranking reads.
// Experiences themselves stay in Badger. It is not safe for concurrent
// use; Store guards it.
type index struct {
	dim      int
	words    int // uint64 words per bit-code half
	docs     []doc
	meta     []filterMeta // docs[i].filterMeta, kept in step by setMeta
	lens     []float32    // document length per slot, dense for BM25
	byKey    map[string]int32
	postings map[string]plist
	filters  map[filterKey][]int32 // ascending slot lists (distances512 relies on it)
	intern   map[string]int32
	names    []string // interned strings by id
	vectors
	// from and src, in a copy made for a snapshot (compactTo), are
	// where its vectors are: slot i's is slot src[i] of from.
	from     *vectors
	src      []int32
	live     int
	dead     int
	totalLen int64
}

type filterKey struct {
	field byte
	value int32
}

func newIndex(dim int) *index {
	return &index{
		dim:      dim,
		words:    (dim + 63) / 64,
		byKey:    map[string]int32{},
		postings: map[string]plist{},
		filters:  map[filterKey][]int32{},
		intern:   map[string]int32{"": 0},
		names:    []string{""},
		vectors:  vectors{dim: dim, words: (dim + 63) / 64},
	}
}

func key(ns, id string) string { return ns + "\x00" + id }

// id interns s; 0 is the empty string.
func (x *index) id(s string) int32 {
	if v, ok := x.intern[s]; ok {
		return v
	}
	v := int32(len(x.names))
	x.intern[s] = v
	x.names = append(x.names, s)
	return v
}

// lookup returns the interned id of s, or -1 when no document has it.
func (x *index) lookup(s string) int32 {
	if v, ok := x.intern[s]; ok {
		return v
	}
	return -1
}

func (x *index) get(ns, id string) (int32, bool) {
	s, ok := x.byKey[key(ns, id)]
	return s, ok
}

// add indexes e in a new slot and retires the slot it replaces, if any.
// The index keeps e's vector (when embID made it) quantised, and none of
// e itself.
func (x *index) add(e *hindsight.Experience, embID string, terms []string) {
	k := key(e.Namespace, e.ID)
	if old, ok := x.byKey[k]; ok {
		x.kill(old)
	}
	slot := int32(len(x.docs))
	d := doc{filterMeta: filterMeta{live: true,
		ns: x.id(e.Namespace), server: x.id(e.Server), tool: x.id(e.Tool),
		task: x.id(e.TaskType), code: x.id(e.ErrorCode)}}
	d.rankMeta.id = k[len(e.Namespace)+1:]
	d.sum = textSum(e)
	x.setMeta(&d, e)
	terms = tokenize.IndexTerms(terms[:0], store.Text(e))
	d.length = int32(len(terms))
	slices.Sort(terms)
	for i := 0; i < len(terms); {
		j := i + 1
		for j < len(terms) && terms[j] == terms[i] {
			j++
		}
		tf := min(j-i, math.MaxUint16)
		p := x.postings[terms[i]]
		p.add(slot, uint16(tf))
		x.postings[terms[i]] = p
		i = j
	}
	for f, v := range [...]int32{d.ns, d.server, d.tool, d.task, d.code} {
		fk := filterKey{byte(f), v}
		x.filters[fk] = append(x.filters[fk], slot)
	}
	x.grow(slot)
	if len(e.Vector) == x.dim && e.Embedder == embID {
		d.hasVec = true
		x.setVector(slot, e.Vector)
	}
	x.docs = append(x.docs, d)
	x.meta = append(x.meta, d.filterMeta)
	x.lens = append(x.lens, float32(d.length))
	x.byKey[k] = slot
	x.live++
	x.totalLen += int64(d.length)
}

// textSum hashes the fields of e that a slot indexes besides its
// metadata: the filter values and the text (FNV-1a, stable across runs).
func textSum(e *hindsight.Experience) uint64 {
	h := fnv.New64a()
	for _, f := range [...]string{e.Namespace, e.Server, e.Tool, e.TaskType, e.ErrorCode, store.Text(e)} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// setMeta copies the fields filters and ranking read of e into d.
func (x *index) setMeta(d *doc, e *hindsight.Experience) {
	d.superseded = e.SupersededBy != ""
	d.deleted = e.Deleted
	d.lastActive = rank.LastActive(e).Unix()
	d.template = x.id(e.ErrorTemplate)
	d.confidence = e.Confidence
	d.evidence, d.hits = int32(min(e.EvidenceCount, math.MaxInt32)), int32(min(e.HitCount, math.MaxInt32))
	d.created, d.updated = e.CreatedAt, e.UpdatedAt
	d.lastHit = time.Time{}
	if e.LastHitAt != nil {
		d.lastHit = *e.LastHitAt
	}
}

// rankExp sets *e to the experience of slot as far as ranking reads it.
func (x *index) rankExp(e *hindsight.Experience, slot int32) {
	d := &x.docs[slot]
	*e = hindsight.Experience{ID: d.id, Namespace: x.names[d.ns], Server: x.names[d.server],
		Tool: x.names[d.tool], TaskType: x.names[d.task], ErrorCode: x.names[d.code],
		ErrorTemplate: x.names[d.template], Confidence: d.confidence,
		EvidenceCount: int(d.evidence), HitCount: int(d.hits),
		CreatedAt: d.created, UpdatedAt: d.updated, Deleted: d.deleted}
	if !d.lastHit.IsZero() {
		t := d.lastHit
		e.LastHitAt = &t
	}
}

// candidateList returns the slots of both arms (best first each) as
// candidates for rank.Options.Fuse: each slot once, with its rank in
// either arm (1-based; 0: not found by it), the vector arm's first. The
// list and the experiences it points to are sc's, valid until sc is put
// back.
func (x *index) candidateList(sc *scratch, vec, lex []scored) []rank.Candidate {
	n := len(vec) + len(lex)
	if cap(sc.exps) < n {
		sc.exps = make([]hindsight.Experience, n)
	}
	exps := sc.exps[:n]
	if cap(sc.cands) < n {
		sc.cands = make([]rank.Candidate, 0, n)
	}
	if sc.at == nil {
		sc.at = map[int32]int32{}
	}
	clear(sc.at)
	list := sc.cands[:0]
	add := func(slot int32) int32 {
		j := int32(len(list))
		sc.at[slot] = j
		x.rankExp(&exps[j], slot)
		list = append(list, rank.Candidate{Exp: &exps[j]})
		return j
	}
	for i, r := range vec {
		j := add(r.slot)
		list[j].VectorRank = i + 1
	}
	for i, r := range lex {
		j, ok := sc.at[r.slot]
		if !ok {
			j = add(r.slot)
		}
		list[j].BM25Rank = i + 1
	}
	sc.cands = list
	return list
}

// replaceMeta updates the metadata of a slot whose text and filter fields
// did not change (hits, supersede, forget, restore, confidence…).
func (x *index) replaceMeta(slot int32, e *hindsight.Experience) {
	d := &x.docs[slot]
	x.setMeta(d, e)
	x.meta[slot] = d.filterMeta
}

func (x *index) kill(slot int32) {
	d := &x.docs[slot]
	if !d.live {
		return
	}
	d.live = false
	x.meta[slot].live = false
	x.live--
	x.dead++
	x.totalLen -= int64(d.length)
}

// needsCompact reports whether dead slots outweigh live ones.
func (x *index) needsCompact() bool { return x.dead > 1024 && x.dead > x.live }

// filter is a query's exact-match filter as interned ids (-1: no document
// has the value, so nothing matches).
type filter struct {
	ns, server, tool, task, code int32 // 0: any (namespace is always set)
	superseded, deleted, cold    bool  // include
	coldBefore                   int64 // lastActive before this is cold
}

func (x *index) compile(q *hindsight.Query, opt rank.Options, now time.Time) filter {
	f := filter{ns: x.lookup(rank.Namespace(q.Namespace)),
		superseded: q.IncludeSuperseded, deleted: q.IncludeDeleted, cold: q.IncludeCold}
	pick := func(v string) int32 {
		if v == "" {
			return 0
		}
		return x.lookup(v)
	}
	f.server, f.tool, f.task, f.code = pick(q.Server), pick(q.Tool), pick(q.TaskType), pick(q.ErrorCode)
	f.coldBefore = now.Add(-coldAfter(opt)).Unix()
	return f
}

func coldAfter(opt rank.Options) time.Duration {
	if opt.ColdAfter > 0 {
		return opt.ColdAfter
	}
	return rank.DefaultColdAfter
}

func (f *filter) empty() bool {
	return f.ns < 0 || f.server < 0 || f.tool < 0 || f.task < 0 || f.code < 0
}

func (f *filter) match(d *filterMeta) bool {
	return d.live && d.ns == f.ns &&
		(f.server == 0 || d.server == f.server) &&
		(f.tool == 0 || d.tool == f.tool) &&
		(f.task == 0 || d.task == f.task) &&
		(f.code == 0 || d.code == f.code) &&
		(f.superseded || !d.superseded) &&
		(f.deleted || !d.deleted) &&
		(f.cold || d.lastActive > f.coldBefore)
}

// candidates returns the smallest filter list that contains every match.
func (x *index) candidates(f *filter) []int32 {
	best := x.filters[filterKey{0, f.ns}]
	for i, v := range [...]int32{f.server, f.tool, f.task, f.code} {
		if v == 0 {
			continue
		}
		if l := x.filters[filterKey{byte(i + 1), v}]; len(l) < len(best) {
			best = l
		}
	}
	return best
}

type scored struct {
	slot  int32
	score float32
}

// scratch holds per-query buffers, pooled across queries.
type scratch struct {
	acc     []float32
	touched []int32
	allowed []uint64
	dist    []uint16
	terms   []string
	top     []scored
	hits    []int32
	vtop    []scored
	hist    []int32
	qcode   []uint64
	coarse  []int32
	// coarseDist is the positive-bits distance of each of coarse.
	coarseDist []uint16
	// cands, exps and at are candidateList's: the candidates, their
	// ranking views and each slot's index in cands.
	cands []rank.Candidate
	exps  []hindsight.Experience
	at    map[int32]int32
	vecs  []float32 // the stored vectors exactHead reads
	// read keeps the bytes knn touches ahead live, so that the reads
	// are not dropped.
	read int8
}

// scratchFree keeps query buffers between queries. Unlike a sync.Pool it
// survives garbage collections, which matters: the buffers are sized to
// the index (hundreds of KB at 100k experiences), and re-allocating them
// per query would itself cause the collections that empty a pool.
var scratchFree = make(chan *scratch, 8)

func getScratch() *scratch {
	select {
	case sc := <-scratchFree:
		return sc
	default:
		return new(scratch)
	}
}

func putScratch(sc *scratch) {
	select {
	case scratchFree <- sc:
	default:
	}
}

// allow marks the slots of cand that pass f in sc.allowed.
func (x *index) allow(sc *scratch, f *filter, cand []int32) []int32 {
	n := (len(x.docs) + 63) / 64
	if cap(sc.allowed) < n {
		sc.allowed = make([]uint64, n)
	}
	sc.allowed = sc.allowed[:n]
	clear(sc.allowed)
	var ok []int32 = sc.touched[:0]
	// A word of the bitmap is built in a register and or-ed in when the
	// next slot falls in another (once a word: cand is ascending).
	var word uint64
	w := uint32(0)
	for _, s := range cand {
		if !f.match(&x.meta[s]) {
			continue
		}
		if u := uint32(s); u/64 != w {
			sc.allowed[w] |= word
			w, word = u/64, 0
		}
		word |= 1 << (uint32(s) % 64)
		ok = append(ok, s)
	}
	sc.allowed[w] |= word
	sc.touched = ok
	return ok
}

// bm25 returns the best n allowed slots for the query terms, best first.
func (x *index) bm25(sc *scratch, text string, n int) []scored {
	sc.terms = tokenize.IndexTerms(sc.terms[:0], text)
	if len(sc.terms) == 0 || x.live == 0 {
		return nil
	}
	if cap(sc.acc) < len(x.docs) {
		sc.acc = make([]float32, len(x.docs))
	}
	acc := sc.acc[:len(x.docs)]
	lens := x.lens[:len(x.docs)]
	allowed := sc.allowed
	hit := sc.hits[:0]
	defer func() { sc.hits = hit[:0] }()
	avgdl := float32(float64(x.totalLen) / float64(max(x.live, 1)))
	// norm = tf*(k1+1) / (tf + k1*(1-b) + k1*b/avgdl*dl)
	base, perLen := float32(bm25K1*(1-bm25B)), float32(bm25K1*bm25B)/avgdl
	slices.Sort(sc.terms)
	terms := slices.Compact(sc.terms)
	N := float64(x.live)
	for _, t := range terms {
		ps := x.postings[t]
		if ps.n == 0 {
			continue
		}
		df := float64(min(int(ps.n), x.live))
		idf := float32(math.Log(1 + (N-df+0.5)/(df+0.5)))
		for slot, f := range ps.all() {
			if allowed[uint32(slot)/64]&(1<<(uint32(slot)%64)) == 0 {
				continue
			}
			tf := float32(f)
			norm := tf * (bm25K1 + 1) / (tf + base + perLen*lens[slot])
			if acc[slot] == 0 {
				hit = append(hit, slot)
			}
			acc[slot] += idf * norm
		}
	}
	top := sc.top[:0]
	for _, s := range hit {
		top = append(top, scored{s, acc[s]})
		acc[s] = 0
	}
	sc.top = top[:0] // keep the big buffer for the next query
	return slices.Clone(selectTop(top, n))
}

// selectTop returns the best n of all, best first (ties: lower slot, which
// is the older document).
func selectTop(all []scored, n int) []scored {
	less := func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return int(a.slot - b.slot)
	}
	if len(all) > 4*n {
		// Find the n-th best score by quickselect-free thresholding:
		// a partial sort is plenty at these sizes.
		all = partialTop(all, n, less)
	}
	slices.SortFunc(all, less)
	if len(all) > n {
		all = all[:n]
	}
	return all
}

// partialTop keeps a bounded min-ordered buffer of the best n.
func partialTop(all []scored, n int, less func(a, b scored) int) []scored {
	h := make([]scored, 0, n)
	// h is a min-heap by goodness: h[0] is the worst kept.
	worse := func(i, j int) bool { return less(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && worse(r, l) {
				m = r
			}
			if !worse(m, i) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for _, s := range all {
		if len(h) < n {
			h = append(h, s)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(i, p) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if less(s, h[0]) < 0 {
			h[0] = s
			down(0)
		}
	}
	return h
}
