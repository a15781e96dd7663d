package spool

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// forgetPlain is forget as a set lookup per step in memory: what forget
// must do.
func forgetPlain(o *Spool, gone map[uint64]bool) {
	memFrom := o.memFrom()
	for seq := range gone {
		if seq < memFrom && o.diskOnly > 0 {
			o.diskOnly--
		}
	}
	j, disk := 0, o.memDisk
	for i, e := range o.mem {
		if gone[e.seq] {
			o.memBytes -= len(e.raw)
			if i < o.memDisk {
				disk--
			}
			continue
		}
		o.mem[j] = e
		j++
	}
	o.mem, o.memDisk = o.mem[:j], disk
}

// TestForget holds forget to forgetPlain: the delivered prefix of memory,
// scattered steps, steps on disk only, duplicates and any order.
func TestForget(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 2000 {
		a, b := &Spool{c: &counters{}}, &Spool{c: &counters{}}
		n := rng.IntN(40)
		seq := uint64(100 + rng.IntN(5))
		diskOnly := rng.IntN(8)
		for range n {
			raw := []byte(fmt.Sprint(seq))
			a.mem = append(a.mem, entry{seq: seq, raw: raw})
			b.mem = append(b.mem, entry{seq: seq, raw: raw})
			a.memBytes += len(raw)
			b.memBytes += len(raw)
			seq += uint64(1 + rng.IntN(2))
		}
		a.memDisk = rng.IntN(n + 1)
		b.memDisk, a.diskOnly, b.diskOnly = a.memDisk, diskOnly, diskOnly
		var gone []uint64
		set := map[uint64]bool{}
		switch rng.IntN(3) {
		case 0: // a prefix, as delivered
			k := rng.IntN(n + 1)
			for _, e := range a.mem[:k] {
				gone = append(gone, e.seq)
			}
		default: // anything around memory, in any order, repeated
			for range rng.IntN(20) {
				s := uint64(90 + rng.IntN(100))
				gone = append(gone, s)
			}
		}
		for _, s := range gone {
			set[s] = true
		}
		rng.Shuffle(len(gone), func(i, j int) { gone[i], gone[j] = gone[j], gone[i] })
		a.forget(slices.Clone(gone))
		forgetPlain(b, set)
		if !slices.EqualFunc(a.mem, b.mem, func(x, y entry) bool { return x.seq == y.seq }) ||
			a.memDisk != b.memDisk || a.memBytes != b.memBytes || a.diskOnly != b.diskOnly {
			t.Fatalf("round %d, gone %v: mem %v disk %d bytes %d diskOnly %d; want mem %v disk %d bytes %d diskOnly %d",
				round, gone, seqs(a.mem), a.memDisk, a.memBytes, a.diskOnly, seqs(b.mem), b.memDisk, b.memBytes, b.diskOnly)
		}
	}
}

func seqs(es []entry) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.seq
	}
	return out
}
