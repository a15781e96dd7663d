package embedded

import (
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
