package embedded

import (
	"math/rand/v2"
	"testing"
)

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
		x.docs = append(x.docs, doc{hasVec: true})
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
	for b.Loop() {
		x.distances(dist, ok, qp, nil)
	}
}

func BenchmarkScanKnn(b *testing.B) {
	x, ok, q := benchIndex(100_000, 512)
	sc := new(scratch)
	for b.Loop() {
		x.knn(sc, q, ok, 100)
	}
}

func BenchmarkScanDot(b *testing.B) {
	x, _, q := benchIndex(1024, 512)
	for b.Loop() {
		for s := range int32(512) {
			x.score(q, s)
		}
	}
}
