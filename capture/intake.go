package capture

import (
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// The hand-off from Hook to the workers.
const (
	maxQueueItems = 1 << 16
	// handOffLinger and handOffBatch batch the hand-off from Hook to the
	// workers: the exchanges queued are handed over handOffLinger after
	// the first of them, or as soon as handOffBatch are waiting, in chunks
	// of handOffChunk (a batch that waited its linger goes to one worker,
	// leaving the other processors to the relay). Calls made one at a
	// time then wake the workers and the committer once per batch instead
	// of once or twice per call. It adds at most handOffLinger to the time
	// until a step is durable, so it applies only while the outbox
	// journals (spool.Spool.Journaling): a step not journaled must be
	// acknowledged or written within its PersistAfter, counted from the
	// exchange's end, and is handed over after commitLinger.
	handOffLinger = 20 * time.Millisecond
	handOffBatch  = commitBatch
	handOffChunk  = 64
)

// intake is the bounded queue between Hook and the workers: it numbers the
// exchanges as they enter it, so that the committer can restore their
// order, and its dispatcher hands them to the workers in chunks.
type intake struct {
	c        *counters
	maxBytes int64 // Options.MaxQueueBytes
	// journaling reports whether the outbox journals: the hand-off then
	// lingers for handOff, otherwise for commitLinger.
	journaling func() bool
	handOff    time.Duration // handOffLinger; tests lengthen it

	mu      sync.Mutex // guards next and pending
	next    uint64     // the arrival number of the next exchange queued
	pending []queued   // queued, not yet handed to the workers

	kick chan struct{} // capacity 1: pending is no longer empty
	full chan struct{} // capacity 1: pending holds handOffBatch, or Sync wants it now
	stop chan struct{} // closed by close: hand over the rest and end
	work chan []queued // the workers' chunks; closed once stop is and pending is empty
}

// queued is an exchange on the queue: size is its share of the bound,
// arrival its place in the order.
type queued struct {
	ex      *proxy.Exchange
	size    int64
	arrival uint64
}

func newIntake(c *counters, maxBytes int64, workers int, journaling func() bool) *intake {
	return &intake{c: c, maxBytes: maxBytes, journaling: journaling, handOff: handOffLinger,
		kick: make(chan struct{}, 1), full: make(chan struct{}, 1), stop: make(chan struct{}),
		work: make(chan []queued, workers)}
}

func exchangeSize(ex *proxy.Exchange) int64 { return int64(len(ex.Request) + len(ex.Response) + 512) }

// tryQueue puts ex on the queue if it has room.
func (q *intake) tryQueue(ex *proxy.Exchange, size int64) bool {
	v := q.c.queuedBytes.Add(size)
	if v > q.maxBytes && q.c.queued.Load() > 0 {
		q.c.queuedBytes.Add(-size)
		return false
	}
	if !q.enqueue(ex, size) {
		q.c.queuedBytes.Add(-size)
		return false
	}
	q.c.notePeak(v)
	q.c.queued.Add(1)
	return true
}

// roomFor reports whether an exchange of size read back from the spill
// may join the queue: it is empty, or the exchange fits in its bound and
// it is less than half full in count.
func (q *intake) roomFor(size int64) bool {
	n := q.c.queued.Load()
	return n == 0 || q.c.queuedBytes.Load()+size <= q.maxBytes && n < maxQueueItems/2
}

// admit puts ex on the queue once roomFor said it may join.
func (q *intake) admit(ex *proxy.Exchange, size int64) {
	q.c.notePeak(q.c.queuedBytes.Add(size))
	q.c.queued.Add(1)
	for !q.enqueue(ex, size) {
		// Only Hook races for the room waited for, and it spills while
		// the spill is read back: this is brief.
		time.Sleep(time.Millisecond)
	}
}

// enqueue numbers ex and puts it on the queue, unless it is full.
func (q *intake) enqueue(ex *proxy.Exchange, size int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) >= maxQueueItems {
		return false
	}
	q.pending = append(q.pending, queued{ex: ex, size: size, arrival: q.next})
	q.next++
	switch len(q.pending) {
	case 1:
		signal(q.kick)
	case handOffBatch:
		signal(q.full)
	}
	return true
}

// hurry has what is queued handed to the workers now, without the linger.
func (q *intake) hurry() {
	q.mu.Lock()
	if len(q.pending) > 0 {
		signal(q.full)
	}
	q.mu.Unlock()
}

// arrivals is the number of exchanges queued so far.
func (q *intake) arrivals() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.next
}

// close has the dispatcher hand over what is queued and close work.
func (q *intake) close() { close(q.stop) }

// signal sends on a channel of capacity one unless a signal is waiting.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// dispatch hands what Hook queued to the workers, handOff (or
// commitLinger) after the first exchange of a batch or once handOffBatch
// are waiting, until close; then it hands over the rest and closes work.
func (q *intake) dispatch() {
	defer close(q.work)
	linger := time.NewTimer(handOffLinger)
	linger.Stop()
	for stopping := false; !stopping; {
		chunk := handOffChunk
		select {
		case <-q.kick:
			d := commitLinger
			if q.journaling() {
				d = q.handOff
			}
			linger.Reset(d)
			select {
			case <-linger.C:
				// A trickle: one worker builds it, leaving the other
				// processors to the relay.
				chunk = handOffBatch
			case <-q.full:
			case <-q.stop:
				stopping = true
			}
			linger.Stop()
		case <-q.stop:
			stopping = true
		}
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		select { // a full signal for the batch just taken
		case <-q.full:
		default:
		}
		q.mu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), chunk)
			q.work <- batch[:n:n]
			batch = batch[n:]
		}
	}
}
