package spool

import (
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/wire"
)

// The writer's buffers.
const (
	// maxScratch is the largest scratch buffer the writer (encode, the
	// journal) keeps between Appends; a larger one, grown by a large
	// step, is let go.
	maxScratch = 1 << 20
	// slabSize is the size of the blocks the encodings are copied into:
	// the largest small allocation, so that a slab is quick to get and
	// goes soon after its steps leave memory.
	slabSize = 32 << 10
)

// An encoded step is a step numbered and encoded by Append, before it
// joins the memory queue.
type encoded struct {
	seq   uint64
	raw   []byte
	ended time.Time // the step's EndedAt, which its deadline counts from
}

// encode numbers steps from next on (setting Source and Seq) and returns
// their compact encodings. Each is encoded into a reused scratch buffer,
// then copied into a slab shared with its neighbours (one of its own when
// it is larger than slabSize), capped so that none can be appended to in
// place. A step that cannot be encoded is lost, counted and not numbered:
// the daemon must see no gap in the seqs. The result is valid until the
// next call. o.wmu is held.
func (o *Spool) encode(steps []hindsight.Step, next uint64) []encoded {
	out := o.encOut[:0]
	slab := o.slab
	for i := range steps {
		s := &steps[i]
		s.Source, s.Seq = o.id, next
		raw, err := wire.AppendCompactStep(o.encBuf[:0], s)
		if err != nil {
			s.Seq = 0
			o.c.losses.Lose(losses.Encode, 1, err.Error())
			o.log.Error("cannot encode step; lost", "method", s.Method, "tool", s.Tool, "err", err)
			continue
		}
		if cap(raw) <= maxScratch {
			o.encBuf = raw
		}
		n := len(raw)
		if n > cap(slab)-len(slab) {
			slab = make([]byte, 0, max(slabSize, n))
		}
		slab = append(slab, raw...)
		out = append(out, encoded{seq: next, raw: slab[len(slab)-n : len(slab) : len(slab)], ended: s.EndedAt})
		next++
	}
	o.slab = slab
	o.encOut = out
	return out
}
