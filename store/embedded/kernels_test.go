package embedded

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHamming512 checks hamming512 (assembly on amd64) against
// hamming512Go over random codes, for run lengths around unrolling and
// with fewer codes than distances.
func TestHamming512(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var q [8]uint64
	for _, n := range []int{0, 1, 2, 7, 8, 9, 1023, 1024} {
		codes := make([]uint64, 8*n)
		for i := range codes {
			codes[i] = r.Uint64()
		}
		for i := range q {
			q[i] = r.Uint64()
		}
		if n > 2 {
			copy(codes[8:16], q[:]) // distance 0
			for i := range 8 {
				codes[16+i] = ^q[i] // distance 512
			}
		}
		for _, extra := range []int{0, 3} { // more distances than codes: the rest stay
			want := make([]uint16, n+extra)
			got := make([]uint16, n+extra)
			for i := n; i < n+extra; i++ {
				want[i], got[i] = 7, 7
			}
			hamming512Go(want, codes, &q)
			hamming512(got, codes, &q)
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d extra=%d: got %v, want %v", n, extra, got, want)
			}
		}
	}
}

// TestDistancesRuns checks distances over 512-dimensional codes (which
// scans runs of consecutive slots as slices) against a per-slot count, for
// slot lists with runs of every length, across chunk boundaries.
func TestDistancesRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := newIndex(512)
	const n = 3*chunkSlots + 100
	x.grow(n - 1)
	for c := range x.pos {
		for i := range x.pos[c] {
			x.pos[c][i], x.neg[c][i] = r.Uint64(), r.Uint64()
		}
	}
	qp, qn := make([]uint64, 8), make([]uint64, 8)
	for i := range qp {
		qp[i], qn[i] = r.Uint64(), r.Uint64()
	}
	lists := map[string][]int32{}
	for _, keep := range []float64{1, 0.99, 0.5, 0.01} {
		var l []int32
		for s := range int32(n) {
			if r.Float64() < keep {
				l = append(l, s)
			}
		}
		lists[fmt.Sprint(keep)] = l
	}
	lists["tail"] = []int32{chunkSlots - 2, chunkSlots - 1, chunkSlots, chunkSlots + 1, n - 1}
	for name, slots := range lists {
		for _, neg := range [][]uint64{nil, qn} {
			want := make([]uint16, len(slots))
			for i, s := range slots {
				p, ng := x.code(s)
				d := 0
				for k := range 8 {
					d += bits.OnesCount64(p[k] ^ qp[k])
					if neg != nil {
						d += bits.OnesCount64(ng[k] ^ neg[k])
					}
				}
				want[i] = uint16(d)
			}
			got := make([]uint16, len(slots))
			x.distances(got, slots, qp, neg)
			if !slices.Equal(got, want) {
				t.Fatalf("%s (negative bits %v): distances differ", name, neg != nil)
			}
		}
	}
}

// TestHistogram checks histogram against a plain count.
func TestHistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 3, 4, 5, 1000} {
		dist := make([]uint16, n)
		want := make([]int32, 20)
		for i := range dist {
			dist[i] = uint16(r.IntN(20))
			want[dist[i]]++
		}
		hist := make([]int32, 4*20)
		for i := range hist {
			hist[i] = 9 // cleared first
		}
		histogram(hist, dist)
		if !slices.Equal(hist[:20], want) {
			t.Fatalf("n=%d: got %v, want %v", n, hist[:20], want)
		}
	}
}

// TestDotInt8 checks dotInt8 bit for bit against the plain sum it
// unrolls (four partial sums, each adding two products at a time).
func TestDotInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 5, 8, 13, 512} {
		a, b := make([]float32, n), make([]int8, n)
		for i := range a {
			a[i], b[i] = float32(r.NormFloat64()), int8(r.IntN(256)-128)
		}
		var s [4]float32
		i := 0
		for ; i+8 <= n; i += 8 {
			for k := range 4 {
				s[k] += a[i+k]*float32(b[i+k]) + a[i+k+4]*float32(b[i+k+4])
			}
		}
		for ; i < n; i++ {
			s[0] += a[i] * float32(b[i])
		}
		want := s[0] + s[1] + s[2] + s[3]
		if got := dotInt8(a, b); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n=%d: got %v, want %v", n, got, want)
		}
	}
}

// TestAllow checks allow's bitmap and list against a per-slot check, for
// candidate lists that skip and revisit bitmap words.
func TestAllow(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	x := newIndex(8)
	for range 1000 {
		m := filterMeta{live: r.IntN(4) > 0, ns: 1, tool: int32(r.IntN(3))}
		x.docs = append(x.docs, doc{filterMeta: m})
		x.meta = append(x.meta, m)
	}
	f := filter{ns: 1, tool: 2, cold: true}
	var all, sparse []int32
	for s := range int32(1000) {
		all = append(all, s)
		if r.IntN(10) == 0 {
			sparse = append(sparse, s)
		}
	}
	unsorted := []int32{900, 3, 64, 65, 2, 999}
	sc := new(scratch)
	for _, cand := range [][]int32{all, sparse, unsorted, nil} {
		ok := x.allow(sc, &f, cand)
		var want []int32
		for _, s := range cand {
			if f.match(&x.meta[s]) {
				want = append(want, s)
			}
		}
		if !slices.Equal(ok, want) {
			t.Fatalf("allowed %v, want %v", ok, want)
		}
		for s := range int32(1000) {
			set := sc.allowed[s/64]&(1<<(s%64)) != 0
			if set != slices.Contains(want, s) {
				t.Fatalf("bitmap bit %d = %v", s, set)
			}
		}
	}
}

// TestRound32 checks round32 against math.Round on halves, integers and
// random values within the ranges quantise and encodeVec use.
func TestRound32(t *testing.T) {
	xs := []float32{0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -126.5, 127, -127, 32766.5, -32767.5, 0.49, -0.49}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		xs = append(xs, (rng.Float32()*2-1)*32768)
	}
	for _, x := range xs {
		if got, want := round32(x), int32(math.Round(float64(x))); got != want {
			t.Errorf("round32(%v) = %d; want %d", x, got, want)
		}
	}
}
