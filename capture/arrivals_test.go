package capture

import (
	"math/rand/v2"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// TestArrivals: steps put in any order, the ring growing past its size
// while the committed base moves, come out in arrival order, each once;
// an emptied large ring is let go.
func TestArrivals(t *testing.T) {
	var r arrivals
	rng := rand.New(rand.NewPCG(1, 2))
	steps := make([]hindsight.Step, 3*maxIdleArrivals)
	var base, next uint64
	pending := map[uint64]bool{}
	for base < uint64(len(steps)) {
		// Put a shuffled run of the next arrivals, then take what is ready.
		n := min(uint64(rng.IntN(2*minArrivals)+1), uint64(len(steps))-next)
		order := rng.Perm(int(n))
		for _, i := range order {
			a := next + uint64(i)
			r.put(base, a, built{step: &steps[a], size: int64(a)})
			pending[a] = true
		}
		next += n
		for take := rng.IntN(int(next-base) + 1); take > 0; take-- {
			b, ok := r.take(base)
			if !ok {
				t.Fatalf("arrival %d not ready", base)
			}
			if b.step != &steps[base] || b.size != int64(base) {
				t.Fatalf("arrival %d: got another step", base)
			}
			delete(pending, base)
			base++
		}
		if r.n != len(pending) {
			t.Fatalf("ring holds %d, want %d", r.n, len(pending))
		}
	}
	if _, ok := r.take(base); ok || r.ready(base) {
		t.Error("an arrival past the last was ready")
	}
	// A burst larger than maxIdleArrivals, last arrival first.
	burst := make([]hindsight.Step, 2*maxIdleArrivals)
	for i := len(burst) - 1; i >= 0; i-- {
		r.put(base, base+uint64(i), built{step: &burst[i]})
	}
	if len(r.slots) < len(burst) {
		t.Fatalf("ring of %d slots holds %d", len(r.slots), len(burst))
	}
	for i := range burst {
		if b, ok := r.take(base + uint64(i)); !ok || b.step != &burst[i] {
			t.Fatalf("burst arrival %d: %v", i, ok)
		}
	}
	if r.n != 0 || r.slots != nil {
		t.Errorf("emptied ring: %d held, %d slots", r.n, len(r.slots))
	}
}
