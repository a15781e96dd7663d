package spool

import (
	"slices"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/wire"
)

// maxEncodeScratch is the largest scratch buffer the writer (encode, the
// journal) keeps between Appends; a larger one, grown by a batch of large
// steps, is let go.
const maxEncodeScratch = 1 << 20

// An encoded step is a step numbered and encoded by Append, before it
// joins the memory queue.
type encoded struct {
	seq   uint64
	raw   []byte
	ended time.Time // the step's EndedAt, which its deadline counts from
}

// encode numbers steps from next on (setting Source and Seq) and returns
// their compact encodings, which share one exact-size allocation (each
// capped, so none can be appended to in place). A step that cannot be
// encoded is lost, counted and not numbered: the daemon must see no gap in
// the seqs. The result is valid until the next call. o.wmu is held.
func (o *Spool) encode(steps []hindsight.Step, next uint64) []encoded {
	buf, out := o.encBuf[:0], o.encOut[:0]
	for i := range steps {
		s := &steps[i]
		s.Source, s.Seq = o.id, next
		start := len(buf)
		var err error
		if buf, err = wire.AppendCompactStep(buf, s); err != nil {
			buf = buf[:start]
			s.Seq = 0
			o.c.losses.Lose(losses.Encode, 1, err.Error())
			o.log.Error("cannot encode step; lost", "method", s.Method, "tool", s.Tool, "err", err)
			continue
		}
		out = append(out, encoded{seq: next, raw: buf[start:], ended: s.EndedAt})
		next++
	}
	// One allocation for the batch: the entries leave memory in seq
	// order, so the block is let go about when its last step is.
	block := slices.Clone(buf) // not zeroed first, as make would
	off := 0
	for i := range out {
		n := len(out[i].raw)
		out[i].raw = block[off : off+n : off+n]
		off += n
	}
	if cap(buf) > maxEncodeScratch {
		buf = nil
	}
	o.encBuf, o.encOut = buf, out
	return out
}
