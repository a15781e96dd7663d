package embedded

import (
	"math/rand/v2"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// loopCPU runs f b.N times and reports process CPU time per run, which on
// a shared machine moves less than wall clock.
func loopCPU(b *testing.B, f func()) {
	cpu0 := testkit.ProcessCPU()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64((testkit.ProcessCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func benchIndex(n, dim int) (*index, []int32, []float32) {
	x := newIndex(dim)
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, dim)
	ok := make([]int32, n)
	for s := range int32(n) {
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		x.grow(s)
		x.setVector(s, v)
		x.docs = append(x.docs, doc{filterMeta: filterMeta{hasVec: true}})
		x.meta = append(x.meta, filterMeta{hasVec: true})
		ok[s] = s
	}
	q := make([]float32, dim)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	normalize(q)
	return x, ok, q
}

func BenchmarkScanDistances(b *testing.B) {
	x, ok, q := benchIndex(100_000, 512)
	qp, qn := make([]uint64, 8), make([]uint64, 8)
	ternary(qp, qn, q)
	dist := make([]uint16, len(ok))
	loopCPU(b, func() { x.distances(dist, ok, qp, nil) })
}

func BenchmarkScanKnn(b *testing.B) {
	x, ok, q := benchIndex(100_000, 512)
	sc := new(scratch)
	loopCPU(b, func() { x.knn(sc, q, ok, 100) })
}

func BenchmarkScanDot(b *testing.B) {
	x, _, q := benchIndex(1024, 512)
	loopCPU(b, func() {
		for s := range int32(512) {
			x.score(q, s)
		}
	})
}

// BenchmarkScanRescore scores 512 slots spread over 100,000 (int8
// vectors of 51 MB), as knn's rescoring does, a different 512 each time
// so that most reads miss the caches.
func BenchmarkScanRescore(b *testing.B) {
	x, ok, q := benchIndex(100_000, 512)
	r := rand.New(rand.NewPCG(3, 4))
	sets := make([][]int32, 256)
	for i := range sets {
		for _, s := range ok {
			if r.IntN(len(ok)) < 512 {
				sets[i] = append(sets[i], s)
			}
		}
	}
	sc := new(scratch)
	i := 0
	loopCPU(b, func() {
		x.knn(sc, q, sets[i%len(sets)], 100)
		i++
	})
}
