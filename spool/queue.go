package spool

import (
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// queue is the spool's memory queue: the newest undelivered steps, in seq
// order, which of them are on disk too, and the state that decides when
// the rest must be written. Its fields are guarded by mu.
type queue struct {
	mu           sync.Mutex
	next         uint64        // seq of the next step
	mem          []entry       // the newest undelivered steps, in seq order
	memDisk      int           // mem[:memDisk] are on disk too; the rest only in memory
	memBytes     int           // their encoded size
	diskOnly     int           // undelivered steps on disk but not in mem; while > 0, delivery reads Badger
	removed      uint64        // the highest seq removed: steps leave in seq order, so all below are gone too
	dirty        bool          // written since the last sync
	lastFailed   bool          // the last delivery attempt failed
	writeFailing bool          // the last write to disk failed
	lastDropLog  time.Time     // when persist last logged dropped steps
	maxDue       time.Time     // no step held only in memory is due later (see pullDues)
	lastWrite    time.Time     // of steps to disk (see closeIdleDisk)
	keptRejected bool          // a refused step is in the database (until Close exports it)
	closed       bool          // Close has begun shutting the database
	room         chan struct{} // made by WaitRoom, closed when delivered steps leave memory
}

// An entry is a step as the outbox keeps it: its seq and its JSON
// encoding, which is what is written to disk and delivered. raw is never
// modified once made. due is when a step held only in memory must be on
// disk.
type entry struct {
	seq       uint64
	raw       json.RawMessage
	due       time.Time
	journaled bool // the journal holds it (safe from a killed process)
	owed      bool // the ledger owes it until it is safe (see ledger)
}

// raws returns the encodings of batch.
func raws(batch []entry) []json.RawMessage {
	out := make([]json.RawMessage, len(batch))
	for i, e := range batch {
		out[i] = e.raw
	}
	return out
}

// pullDues brings the deadlines of the steps held only in memory in
// mem[:end] forward to due, and reports whether it moved any. q.mu is held.
func (q *queue) pullDues(end int, due time.Time) bool {
	if !q.maxDue.After(due) {
		return false
	}
	for i := q.memDisk; i < end; i++ {
		if q.mem[i].due.After(due) {
			q.mem[i].due = due
		}
	}
	q.maxDue = due
	for _, e := range q.mem[end:] {
		q.maxDue = later(q.maxDue, e.due)
	}
	return true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// trimMem lets the oldest steps that are on disk leave memory while it
// holds more than MaxMemBytes. o.mu is held.
func (o *Spool) trimMem() {
	drop := 0
	for o.memBytes > o.opts.MaxMemBytes && drop < o.memDisk {
		o.memBytes -= len(o.mem[drop].raw)
		drop++
	}
	if drop > 0 {
		o.diskOnly += drop
		o.memDisk -= drop
		clear(o.mem[:drop]) // let the bodies go; append moves the rest when it grows
		o.mem = o.mem[drop:]
	}
}

// forget removes the steps whose seqs gone lists (in any order) from mem
// and from the count of steps on disk only. Delivered steps are mostly the
// oldest in memory: those leave by reslicing mem, as in trimMem, and only
// the steps after a gap move. o.mu is held.
func (o *Spool) forget(gone []uint64) {
	if !slices.IsSorted(gone) {
		slices.Sort(gone)
	}
	gone = slices.Compact(gone)
	memFrom := o.memFrom()
	for _, seq := range gone {
		if seq < memFrom && o.diskOnly > 0 {
			o.diskOnly--
		}
	}
	g, disk := 0, o.memDisk
	// isGone reports whether seq is listed, moving g past the smaller
	// seqs: mem is in seq order too.
	isGone := func(seq uint64) bool {
		for g < len(gone) && gone[g] < seq {
			g++
		}
		return g < len(gone) && gone[g] == seq
	}
	drop := func(i int) {
		o.settleOwed(o.mem[i : i+1])
		o.memBytes -= len(o.mem[i].raw)
		if i < o.memDisk {
			disk--
		}
	}
	i := 0
	for ; i < len(o.mem) && isGone(o.mem[i].seq); i++ {
		drop(i)
	}
	start, j := i, i
	for ; i < len(o.mem) && g < len(gone); i++ {
		if isGone(o.mem[i].seq) {
			drop(i)
			continue
		}
		o.mem[j] = o.mem[i]
		j++
	}
	if j < i {
		j += copy(o.mem[j:], o.mem[i:])
	} else {
		j = len(o.mem)
	}
	clear(o.mem[:start]) // let the bodies go; append moves the rest when it grows
	clear(o.mem[j:])
	o.mem, o.memDisk = o.mem[start:j], disk
	if o.writeFailing {
		o.c.held.Store(int64(len(o.mem) - o.memDisk))
		n := 0
		for _, e := range o.mem[o.memDisk:] {
			n += len(e.raw)
		}
		o.c.heldBytes.Store(int64(n))
	}
}

// memFrom is the seq of the oldest step in memory: every undelivered step
// below it is on disk only. q.mu is held.
func (q *queue) memFrom() uint64 {
	if len(q.mem) > 0 {
		return q.mem[0].seq
	}
	return ^uint64(0)
}

// onDisk reports which of steps are stored in Badger. q.mu is held.
func (q *queue) onDisk(steps []entry) []entry {
	memFrom, lastDisk := q.memFrom(), uint64(0)
	if q.memDisk > 0 {
		lastDisk = q.mem[q.memDisk-1].seq
	}
	var out []entry
	for _, e := range steps {
		if e.seq < memFrom || e.seq <= lastDisk {
			out = append(out, e)
		}
	}
	return out
}
