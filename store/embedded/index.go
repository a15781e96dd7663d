package embedded

import (
	"math"
	"math/bits"
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
	// exactScan is the candidate count up to which vectors are compared
	// exactly; above it a binary-quantised pass picks rescore candidates.
	exactScan = 4096
	rescore   = 512
	// coarseKeep is how many candidates the positive-bits pass keeps for
	// the full ternary codes (see preselect).
	coarseKeep = 2 * rescore
)

type posting struct {
	slot int32
	tf   uint16
}

// doc is one slot of the index. A replaced or re-indexed experience leaves
// a dead slot behind; dead slots are skipped and dropped by compact.
type doc struct {
	filterMeta
	exp    *hindsight.Experience
	hasVec bool
	length int32
}

// filterMeta is what filters read of a doc. The index keeps a dense copy
// of each doc's in index.meta, so that filtering streams 32 bytes a slot.
type filterMeta struct {
	// interned filter values, compared as integers when filtering.
	ns, server, tool, task, code int32
	live, superseded, deleted    bool
	lastActive                   int64 // unix seconds, see rank.LastActive
}

// index is the in-memory search structure of a Store: BM25 postings, a
// float32 vector slab with a ternary bit code per vector for fast
// pre-selection, and exact-match filter lists. It is rebuilt from Badger at
// open. It is not safe for concurrent use; Store guards it.
type index struct {
	dim      int
	words    int // uint64 words per bit-code half
	docs     []doc
	meta     []filterMeta // docs[i].filterMeta, kept in step by syncMeta
	lens     []float32    // document length per slot, dense for BM25
	byKey    map[string]int32
	postings map[string][]posting
	filters  map[filterKey][]int32
	intern   map[string]int32
	// Vectors (dim float32 per slot) and their ternary codes (words
	// uint64 of positive bits per slot in pos, of negative bits in neg)
	// live in chunks of chunkSlots slots, so growing never copies the
	// whole slab. Pre-selection scans pos alone first, so it is a slab of
	// its own.
	vecs     [][]float32
	pos, neg [][]uint64
	live     int
	dead     int
	totalLen int64
}

const chunkSlots = 1024

// ternary writes v's ternary sign code into pos and neg (words long each).
func ternary(pos, neg []uint64, v []float32) {
	clear(pos)
	clear(neg)
	for i, f := range v {
		switch {
		case f > 0:
			pos[i/64] |= 1 << (i % 64)
		case f < 0:
			neg[i/64] |= 1 << (i % 64)
		}
	}
}

// vec returns slot's vector storage.
func (x *index) vec(slot int32) []float32 {
	off := int(slot%chunkSlots) * x.dim
	return x.vecs[slot/chunkSlots][off : off+x.dim]
}

// code returns slot's ternary code storage: positive and negative bits.
func (x *index) code(slot int32) (pos, neg []uint64) {
	off := int(slot%chunkSlots) * x.words
	c := slot / chunkSlots
	return x.pos[c][off : off+x.words], x.neg[c][off : off+x.words]
}

// grow makes room for slot.
func (x *index) grow(slot int32) {
	if int(slot/chunkSlots) >= len(x.vecs) {
		x.vecs = append(x.vecs, make([]float32, chunkSlots*x.dim))
		x.pos = append(x.pos, make([]uint64, chunkSlots*x.words))
		x.neg = append(x.neg, make([]uint64, chunkSlots*x.words))
	}
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
		postings: map[string][]posting{},
		filters:  map[filterKey][]int32{},
		intern:   map[string]int32{"": 0},
	}
}

func key(ns, id string) string { return ns + "\x00" + id }

// id interns s; 0 is the empty string.
func (x *index) id(s string) int32 {
	if v, ok := x.intern[s]; ok {
		return v
	}
	v := int32(len(x.intern))
	x.intern[s] = v
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

// add indexes e (which the index now owns) in a new slot and retires the
// slot it replaces, if any.
func (x *index) add(e *hindsight.Experience, embID string, terms []string) {
	k := key(e.Namespace, e.ID)
	if old, ok := x.byKey[k]; ok {
		x.kill(old)
	}
	slot := int32(len(x.docs))
	d := doc{exp: e, filterMeta: filterMeta{live: true,
		ns: x.id(e.Namespace), server: x.id(e.Server), tool: x.id(e.Tool),
		task: x.id(e.TaskType), code: x.id(e.ErrorCode)}}
	x.setMeta(&d)
	terms = tokenize.IndexTerms(terms[:0], store.Text(e))
	d.length = int32(len(terms))
	slices.Sort(terms)
	for i := 0; i < len(terms); {
		j := i + 1
		for j < len(terms) && terms[j] == terms[i] {
			j++
		}
		tf := min(j-i, math.MaxUint16)
		x.postings[terms[i]] = append(x.postings[terms[i]], posting{slot: slot, tf: uint16(tf)})
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
	// The index keeps its own copy of the vector in the slab.
	e.Vector = nil
	x.docs = append(x.docs, d)
	x.meta = append(x.meta, d.filterMeta)
	x.lens = append(x.lens, float32(d.length))
	x.byKey[k] = slot
	x.live++
	x.totalLen += int64(d.length)
}

func (x *index) setMeta(d *doc) {
	d.superseded = d.exp.SupersededBy != ""
	d.deleted = d.exp.Deleted
	d.lastActive = rank.LastActive(d.exp).Unix()
}

// setVector stores v scaled to unit length, so that the inner product is
// the cosine, and its ternary sign code.
func (x *index) setVector(slot int32, v []float32) {
	dst := x.vec(slot)
	copy(dst, v)
	normalize(dst)
	pos, neg := x.code(slot)
	ternary(pos, neg, dst)
}

// vector returns a copy of slot's vector, or nil.
func (x *index) vector(slot int32) []float32 {
	if !x.docs[slot].hasVec {
		return nil
	}
	return slices.Clone(x.vec(slot))
}

// replaceMeta swaps the experience of a slot whose text and filter fields
// did not change (hits, supersede, forget, restore, confidence…).
func (x *index) replaceMeta(slot int32, e *hindsight.Experience) {
	e.Vector = nil
	d := &x.docs[slot]
	d.exp = e
	x.setMeta(d)
	x.meta[slot] = d.filterMeta
}

func (x *index) kill(slot int32) {
	d := &x.docs[slot]
	if !d.live {
		return
	}
	d.live = false
	d.exp = nil
	x.meta[slot].live = false
	x.live--
	x.dead++
	x.totalLen -= int64(d.length)
}

// needsCompact reports whether dead slots outweigh live ones.
func (x *index) needsCompact() bool { return x.dead > 1024 && x.dead > x.live }

// compact rebuilds the index from its live slots.
func (x *index) compact(embID string) *index {
	nx := newIndex(x.dim)
	var terms []string
	for slot := range x.docs {
		d := &x.docs[slot]
		if !d.live {
			continue
		}
		e := d.exp
		if d.hasVec {
			e.Vector = x.vec(int32(slot))
		}
		nx.add(e, embID, terms)
	}
	return nx
}

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
	hist    []int
	qcode   []uint64
	coarse  []int32
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
	for _, s := range cand {
		if f.match(&x.meta[s]) {
			sc.allowed[s/64] |= 1 << (s % 64)
			ok = append(ok, s)
		}
	}
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
		if len(ps) == 0 {
			continue
		}
		df := float64(min(len(ps), x.live))
		idf := float32(math.Log(1 + (N-df+0.5)/(df+0.5)))
		for _, p := range ps {
			if allowed[uint32(p.slot)/64]&(1<<(uint32(p.slot)%64)) == 0 {
				continue
			}
			tf := float32(p.tf)
			norm := tf * (bm25K1 + 1) / (tf + base + perLen*lens[p.slot])
			if acc[p.slot] == 0 {
				hit = append(hit, p.slot)
			}
			acc[p.slot] += idf * norm
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

// knn returns the best n allowed slots by cosine similarity to q (unit
// length), best first. ok is the allowed slots.
func (x *index) knn(sc *scratch, q []float32, ok []int32, n int) []scored {
	if len(q) != x.dim {
		return nil
	}
	cand := ok
	if len(ok) > exactScan {
		cand = x.preselect(sc, q, ok, rescore)
	}
	top := sc.vtop[:0]
	defer func() { sc.vtop = top[:0] }()
	for _, s := range cand {
		if x.docs[s].hasVec {
			top = append(top, scored{s, dot(q, x.vec(s))})
		}
	}
	return slices.Clone(selectTop(top, n))
}

// preselect picks about r of ok whose ternary codes are nearest to q's
// (Hamming distance over the positive and negative sign bits). Over many
// candidates a first pass compares the positive bits alone (a binary code,
// half the memory to stream) and keeps coarseKeep for the full codes.
func (x *index) preselect(sc *scratch, q []float32, ok []int32, r int) []int32 {
	w := x.words
	if cap(sc.qcode) < 2*w {
		sc.qcode = make([]uint64, 2*w)
	}
	qp, qn := sc.qcode[:w], sc.qcode[w:2*w]
	ternary(qp, qn, q)
	cand := ok
	if len(ok) > 2*coarseKeep {
		cand = x.nearest(sc, sc.coarse[:0], ok, qp, nil, coarseKeep)
		sc.coarse = cand
	}
	return x.nearest(sc, nil, cand, qp, qn, r)
}

// nearest appends to out about r of slots whose codes are nearest to the
// query's (qn nil: positive bits only). It counts a histogram of distances
// instead of sorting. Experiences without a vector have an all-zero code;
// knn skips them after pre-selection.
func (x *index) nearest(sc *scratch, out, slots []int32, qp, qn []uint64, r int) []int32 {
	if cap(sc.dist) < len(slots) {
		sc.dist = make([]uint16, len(slots))
	}
	dist := sc.dist[:len(slots)]
	if cap(sc.hist) < 2*64*x.words+2 {
		sc.hist = make([]int, 2*64*x.words+2)
	}
	hist := sc.hist[:2*64*x.words+2]
	clear(hist)
	x.distances(dist, slots, qp, qn)
	for _, d := range dist {
		hist[d]++
	}
	limit, sum := 0, 0
	for limit = 0; limit < len(hist)-1; limit++ {
		sum += hist[limit]
		if sum >= r {
			break
		}
	}
	// Everything nearer than the limit, then ties at the limit until r.
	below := sum - hist[min(limit, len(hist)-1)]
	room := max(r-below, 0)
	if out == nil {
		out = make([]int32, 0, below+room)
	}
	for i, s := range slots {
		switch d := int(dist[i]); {
		case d < limit:
			out = append(out, s)
		case d == limit && room > 0:
			out = append(out, s)
			room--
		}
	}
	return out
}

// distances sets dist[i] to the Hamming distance between the query's
// code and slots[i]'s (qn nil: over the positive bits only).
func (x *index) distances(dist []uint16, slots []int32, qp, qn []uint64) {
	if len(qp) == 8 { // 512 dimensions: fixed size, unrolled
		var n8 *[8]uint64
		if qn != nil {
			n8 = (*[8]uint64)(qn)
		}
		x.distances512(dist, slots, (*[8]uint64)(qp), n8)
		return
	}
	for i, s := range slots {
		pos, neg := x.code(s)
		d := 0
		for k, v := range qp {
			d += bits.OnesCount64(pos[k] ^ v)
		}
		for k, v := range qn {
			d += bits.OnesCount64(neg[k] ^ v)
		}
		dist[i] = uint16(d)
	}
}

// distances512 is distances for 512-dimensional codes. It runs for every
// candidate of an unfiltered query, so the query words stay in registers
// and the popcounts are unrolled.
func (x *index) distances512(dist []uint16, slots []int32, qp, qn *[8]uint64) {
	q0, q1, q2, q3, q4, q5, q6, q7 := qp[0], qp[1], qp[2], qp[3], qp[4], qp[5], qp[6], qp[7]
	for i, s := range slots {
		c, off := uint32(s)/chunkSlots, uint32(s)%chunkSlots*8
		p := (*[8]uint64)(x.pos[c][off:])
		d := bits.OnesCount64(p[0]^q0) + bits.OnesCount64(p[1]^q1) +
			bits.OnesCount64(p[2]^q2) + bits.OnesCount64(p[3]^q3) +
			bits.OnesCount64(p[4]^q4) + bits.OnesCount64(p[5]^q5) +
			bits.OnesCount64(p[6]^q6) + bits.OnesCount64(p[7]^q7)
		if qn != nil {
			n := (*[8]uint64)(x.neg[c][off:])
			for k := range 8 {
				d += bits.OnesCount64(n[k] ^ qn[k])
			}
		}
		dist[i] = uint16(d)
	}
}

// dot is the inner product of two equal-length vectors.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += a[i]*b[i] + a[i+4]*b[i+4]
		s1 += a[i+1]*b[i+1] + a[i+5]*b[i+5]
		s2 += a[i+2]*b[i+2] + a[i+6]*b[i+6]
		s3 += a[i+3]*b[i+3] + a[i+7]*b[i+7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// normalize scales v to unit length in place (the zero vector stays zero).
func normalize(v []float32) {
	var n float64
	for _, f := range v {
		n += float64(f) * float64(f)
	}
	if n == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
}
