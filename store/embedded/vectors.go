package embedded

import (
	"math"
	"math/bits"
	"slices"
	"unsafe"
)

const (
	// exactScan is the candidate count up to which vectors are compared
	// exactly; above it a binary-quantised pass picks rescore candidates.
	exactScan = 4096
	rescore   = 512
	// exactTop is how many of the best by int8 vectors are re-ranked by
	// the stored float32 vectors (see Store.exactHead).
	exactTop = 8
	// coarseKeep is how many candidates the positive-bits pass keeps for
	// the full ternary codes (see preselect).
	coarseKeep = 2 * rescore
)

// chunkSlots is the number of slots a chunk of vector storage holds, so
// that growing never copies the whole slab.
const chunkSlots = 1024

// vectors holds each slot's unit-length vector quantised to int8 with a
// per-vector scale (v[i] ≈ q[i]*scale), and its ternary sign code: words
// uint64 of positive bits in pos, of negative bits in neg. Pre-selection
// scans pos alone first, so it is a slab of its own.
//
// Chunks loaded from a snapshot point into a read-only mapping of it
// (region); the first write to such a chunk copies it to the heap.
type vectors struct {
	dim, words int
	q          [][]int8
	scales     []float32
	pos, neg   [][]uint64
	shared     []bool // per chunk: it points into region
	region     []byte
	regionOff  int64 // offset of region in the snapshot file
	// frozen: the vectors of the slots below it are being written to a
	// snapshot from these chunks (see freeze); thawed marks the chunks
	// copied since.
	frozen int32
	thawed []bool
}

// freeze tells v that the vectors of its first n slots are being read
// from its chunks as they are now: until thaw, a vector changed in
// place is written to a copy of its chunk (one per chunk).
func (v *vectors) freeze(n int32) {
	v.frozen, v.thawed = n, make([]bool, len(v.q))
}

// thaw ends freeze.
func (v *vectors) thaw() { v.frozen, v.thawed = 0, nil }

// vectorAlign is the alignment of the vector chunks in a snapshot: a
// multiple of every page size, so they can be mapped.
const vectorAlign = 64 << 10

// chunkBytes is the size of one chunk: int8 vectors, then both codes.
func (v *vectors) chunkBytes() int64 {
	return int64(chunkSlots) * int64(v.dim+16*v.words)
}

// attach points the vectors' chunks into region, which holds them as a
// snapshot lays them out.
func (v *vectors) attach(region []byte) {
	v.region = region
	cb := v.chunkBytes()
	qn, wn := chunkSlots*v.dim, chunkSlots*v.words
	for off := int64(0); off+cb <= int64(len(region)); off += cb {
		b := region[off : off+cb]
		v.q = append(v.q, unsafe.Slice((*int8)(unsafe.Pointer(&b[0])), qn))
		v.pos = append(v.pos, unsafe.Slice((*uint64)(unsafe.Pointer(&b[qn])), wn))
		v.neg = append(v.neg, unsafe.Slice((*uint64)(unsafe.Pointer(&b[qn+8*wn])), wn))
		v.shared = append(v.shared, true)
	}
}

// own copies chunk c to the heap if it points into the mapping.
func (v *vectors) own(c int32) {
	if !v.shared[c] {
		return
	}
	v.q[c], v.pos[c], v.neg[c] = slices.Clone(v.q[c]), slices.Clone(v.pos[c]), slices.Clone(v.neg[c])
	v.shared[c] = false
}

// mapped reports whether any chunk still points into the mapping.
func (v *vectors) mapped() bool { return slices.Contains(v.shared, true) }

// grow makes room for slot.
func (v *vectors) grow(slot int32) {
	for int(slot/chunkSlots) >= len(v.q) {
		v.q = append(v.q, make([]int8, chunkSlots*v.dim))
		v.pos = append(v.pos, make([]uint64, chunkSlots*v.words))
		v.neg = append(v.neg, make([]uint64, chunkSlots*v.words))
		v.shared = append(v.shared, false)
	}
	if n := int(slot) + 1 - len(v.scales); n > 0 {
		v.scales = append(v.scales, make([]float32, n)...)
	}
}

// quantised returns slot's int8 storage.
func (v *vectors) quantised(slot int32) []int8 {
	off := int(slot%chunkSlots) * v.dim
	return v.q[slot/chunkSlots][off : off+v.dim]
}

// code returns slot's ternary code storage: positive and negative bits.
func (v *vectors) code(slot int32) (pos, neg []uint64) {
	off := int(slot%chunkSlots) * v.words
	c := slot / chunkSlots
	return v.pos[c][off : off+v.words], v.neg[c][off : off+v.words]
}

// setVector stores vec scaled to unit length (so that the inner product
// is the cosine) and quantised, and its ternary sign code, taken from the
// unquantised vector.
func (v *vectors) setVector(slot int32, vec []float32) {
	c := slot / chunkSlots
	if slot < v.frozen && !v.thawed[c] {
		v.shared[c] = true // copy it, as a mapped one
		v.thawed[c] = true
	}
	v.own(c)
	u := slices.Clone(vec)
	normalize(u)
	pos, neg := v.code(slot)
	ternary(pos, neg, u)
	v.scales[slot] = quantise(v.quantised(slot), u)
}

// quantise writes u as int8 into dst and returns the scale: u[i] ≈
// dst[i]*scale, with the largest magnitude mapped to 127.
func quantise(dst []int8, u []float32) float32 {
	var m float32
	for _, f := range u {
		m = max(m, abs32(f))
	}
	if m == 0 {
		clear(dst)
		return 0
	}
	inv := 127 / m
	for i, f := range u {
		dst[i] = int8(round32(f * inv))
	}
	return m / 127
}

// round32 is x rounded half away from zero (as math.Round), for |x| below
// 2^31, without the conversions to and from float64.
func round32(x float32) int32 {
	if x < 0 {
		return int32(x - 0.5)
	}
	return int32(x + 0.5)
}

func abs32(f float32) float32 {
	if f < 0 {
		return -f
	}
	return f
}

// score is the inner product of the unit-length query q with slot's
// quantised vector.
func (v *vectors) score(q []float32, slot int32) float32 {
	return dotInt8(q, v.quantised(slot)) * v.scales[slot]
}

// dotInt8 is the inner product of a float32 and an int8 vector of equal
// length. It reads each int8's float32 value from a table (the same value
// a conversion gives, fewer instructions).
func dotInt8(a []float32, b []int8) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		a8, b8 := (*[8]float32)(a[i:]), (*[8]int8)(b[i:])
		s0 += a8[0]*int8Float[uint8(b8[0])] + a8[4]*int8Float[uint8(b8[4])]
		s1 += a8[1]*int8Float[uint8(b8[1])] + a8[5]*int8Float[uint8(b8[5])]
		s2 += a8[2]*int8Float[uint8(b8[2])] + a8[6]*int8Float[uint8(b8[6])]
		s3 += a8[3]*int8Float[uint8(b8[3])] + a8[7]*int8Float[uint8(b8[7])]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * float32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// int8Float maps an int8's bits (as uint8) to its float32 value.
var int8Float = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(int8(uint8(i)))
	}
	return t
}()

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
	var read int8
	for i, s := range cand {
		if i+touchAhead < len(cand) {
			read ^= touch(x.quantised(cand[i+touchAhead]))
		}
		if x.meta[s].hasVec {
			top = append(top, scored{s, x.score(q, s)})
		}
	}
	sc.read = read
	return slices.Clone(selectTop(top, n))
}

// touchAhead is how many candidates ahead of the one it scores knn reads
// a byte of each cache line of a vector, so that the memory reads of the
// next vectors overlap the arithmetic of this one.
const touchAhead = 2

// touch reads one byte of every 64-byte cache line of v.
func touch(v []int8) int8 {
	var t int8
	for i := 0; i < len(v); i += 64 {
		t ^= v[i]
	}
	return t
}

// preselect picks about r of ok whose ternary codes are nearest to q's
// (Hamming distance over the positive and negative sign bits). Over many
// candidates a first pass compares the positive bits alone (a binary code,
// half the memory to stream) and keeps coarseKeep, to whose distances the
// second pass adds those of the negative bits.
func (x *index) preselect(sc *scratch, q []float32, ok []int32, r int) []int32 {
	w := x.words
	if cap(sc.qcode) < 2*w {
		sc.qcode = make([]uint64, 2*w)
	}
	qp, qn := sc.qcode[:w], sc.qcode[w:2*w]
	ternary(qp, qn, q)
	if cap(sc.dist) < len(ok) {
		sc.dist = make([]uint16, len(ok))
	}
	dist := sc.dist[:len(ok)]
	if len(ok) <= 2*coarseKeep {
		x.distances(dist, ok, qp, qn)
		out, _ := x.nearest(sc, nil, nil, ok, dist, r)
		return out
	}
	x.distances(dist, ok, qp, nil)
	if sc.coarseDist == nil {
		sc.coarseDist = make([]uint16, 0, coarseKeep)
	}
	cand, cdist := x.nearest(sc, sc.coarse[:0], sc.coarseDist[:0], ok, dist, coarseKeep)
	sc.coarse, sc.coarseDist = cand, cdist
	x.addNegative(cdist, cand, qn)
	out, _ := x.nearest(sc, nil, nil, cand, cdist, r)
	return out
}

// addNegative adds to dist[i] the Hamming distance between qn and the
// negative bits of slots[i]'s code.
func (x *index) addNegative(dist []uint16, slots []int32, qn []uint64) {
	for i, s := range slots {
		_, neg := x.code(s)
		d := 0
		for k, v := range qn {
			d += bits.OnesCount64(neg[k] ^ v)
		}
		dist[i] += uint16(d)
	}
}

// nearest appends to out about r of slots by their distances dist (to the
// query's code), nearest first in slot order, and to outDist (when not
// nil) their distances. It counts a histogram of distances instead of
// sorting. Experiences without a vector have an all-zero code; knn skips
// them after pre-selection.
func (x *index) nearest(sc *scratch, out []int32, outDist []uint16, slots []int32, dist []uint16, r int) ([]int32, []uint16) {
	bins := 2*64*x.words + 2
	if cap(sc.hist) < 4*bins {
		sc.hist = make([]int32, 4*bins)
	}
	hist := sc.hist[:bins]
	histogram(sc.hist[:4*bins], dist)
	limit, sum := 0, 0
	for limit = 0; limit < len(hist)-1; limit++ {
		sum += int(hist[limit])
		if sum >= r {
			break
		}
	}
	// Everything nearer than the limit, then ties at the limit until r.
	below := sum - int(hist[min(limit, len(hist)-1)])
	room := max(r-below, 0)
	if out == nil {
		out = make([]int32, 0, below+room)
	}
	for i, s := range slots {
		switch d := int(dist[i]); {
		case d < limit:
		case d == limit && room > 0:
			room--
		default:
			continue
		}
		out = append(out, s)
		if outDist != nil {
			outDist = append(outDist, dist[i])
		}
	}
	return out, outDist
}

// histogram sets hist[:len(hist)/4][d] to the number of d in dist. It
// counts into four interleaved histograms (the rest of hist), so that
// runs of equal distances do not wait on each other's increments.
func histogram(hist []int32, dist []uint16) {
	clear(hist)
	bins := len(hist) / 4
	h0, h1, h2, h3 := hist[:bins], hist[bins:2*bins], hist[2*bins:3*bins], hist[3*bins:]
	i := 0
	for ; i+4 <= len(dist); i += 4 {
		h0[dist[i]]++
		h1[dist[i+1]]++
		h2[dist[i+2]]++
		h3[dist[i+3]]++
	}
	for ; i < len(dist); i++ {
		h0[dist[i]]++
	}
	for d := range h0 {
		h0[d] += h1[d] + h2[d] + h3[d]
	}
}

// distances sets dist[i] to the Hamming distance between the query's
// code and slots[i]'s (qn nil: over the positive bits only). slots are
// ascending, as every slot list of the index is.
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
// candidate of an unfiltered query, so it walks each run of consecutive
// slots of one chunk as a contiguous slice of codes.
func (x *index) distances512(dist []uint16, slots []int32, qp, qn *[8]uint64) {
	dist = dist[:len(slots)]
	for i := 0; i < len(slots); {
		s := uint32(slots[i])
		c, first := s/chunkSlots, s%chunkSlots
		// The run of consecutive slots from i within chunk c: ascending
		// slots that span as many values as entries are consecutive.
		n := uint32(min(chunkSlots-first, uint32(len(slots)-i)))
		if uint32(slots[i+int(n)-1]) != s+n-1 {
			n = 1
			for i+int(n) < len(slots) && first+n < chunkSlots && uint32(slots[i+int(n)]) == s+n {
				n++
			}
		}
		lo, hi := first*8, (first+n)*8
		if qn == nil {
			hamming512(dist[i:i+int(n)], x.pos[c][lo:hi], qp)
		} else {
			hamming512x2(dist[i:i+int(n)], x.pos[c][lo:hi], x.neg[c][lo:hi], qp, qn)
		}
		i += int(n)
	}
}

// hamming512x2 is hamming512 over ternary codes: positive and negative
// bits.
func hamming512x2(dist []uint16, pos, neg []uint64, qp, qn *[8]uint64) {
	for i := range dist {
		if len(pos) < 8 || len(neg) < 8 {
			return
		}
		p, n := (*[8]uint64)(pos), (*[8]uint64)(neg)
		pos, neg = pos[8:], neg[8:]
		d := 0
		for k := range 8 {
			d += bits.OnesCount64(p[k]^qp[k]) + bits.OnesCount64(n[k]^qn[k])
		}
		dist[i] = uint16(d)
	}
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
