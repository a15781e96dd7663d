package capture

import "github.com/hindsight-proxy/hindsight"

// minArrivals and maxIdleArrivals size the committer's ring: it starts at
// minArrivals slots, doubles while more steps wait, and is let go when it
// empties past maxIdleArrivals, so a burst does not keep it large.
const (
	minArrivals     = 256
	maxIdleArrivals = 4096
)

// arrivals holds the built steps waiting to be committed, by arrival, in a
// ring: arrival a is in slots[a % len(slots)]. Every arrival held is at
// least the base its caller passes (the next to commit) and less than base
// plus the ring's size.
type arrivals struct {
	slots []built // len is 0 or a power of two
	n     int     // slots in use
}

// built is a step waiting for its turn to be committed; step is nil when
// building it failed. size is the exchange's share of the queue bound,
// released at commit so built steps count against it too. in marks a slot
// in use.
type built struct {
	step *hindsight.Step
	size int64
	in   bool
}

// put holds b for arrival a; base is the next arrival to commit.
func (r *arrivals) put(base, a uint64, b built) {
	for a-base >= uint64(len(r.slots)) {
		r.grow(base)
	}
	b.in = true
	r.slots[a&uint64(len(r.slots)-1)] = b
	r.n++
}

// ready reports whether arrival a is held.
func (r *arrivals) ready(a uint64) bool {
	return len(r.slots) > 0 && r.slots[a&uint64(len(r.slots)-1)].in
}

// take removes arrival a and returns it, if it is held.
func (r *arrivals) take(a uint64) (built, bool) {
	if !r.ready(a) {
		return built{}, false
	}
	i := a & uint64(len(r.slots)-1)
	b := r.slots[i]
	r.slots[i] = built{}
	if r.n--; r.n == 0 && len(r.slots) > maxIdleArrivals {
		r.slots = nil
	}
	return b, true
}

// grow doubles the ring, keeping each arrival from base on in its slot.
func (r *arrivals) grow(base uint64) {
	size := max(2*len(r.slots), minArrivals)
	slots := make([]built, size)
	for a := base; a < base+uint64(len(r.slots)); a++ {
		slots[a&uint64(size-1)] = r.slots[a&uint64(len(r.slots)-1)]
	}
	r.slots = slots
}
