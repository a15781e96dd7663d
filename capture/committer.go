package capture

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/prometheus/client_golang/prometheus"
)

// The committer's batches.
const (
	commitBatch = 256
	// commitLinger spaces the commits of small batches, so that calls made
	// one at a time share a Badger transaction instead of paying one each;
	// it adds at most that much to the time until a step is durable (well
	// within the 50 ms a killed sidecar may lose).
	commitLinger = 2 * time.Millisecond
)

// A committer takes the steps the workers built back into arrival order,
// tags and counts them, and hands them to the outbox in batches.
type committer struct {
	// waitRoom waits while the outbox has no room; store hands it a
	// batch.
	waitRoom  func()
	store     func([]hindsight.Step)
	storeMu   sync.Mutex // serialises tagging and storing with commitNow
	tagger    *Tagger
	c         *counters
	calls     *callCounters        // the Recorder's (Calls)
	processed *atomic.Int64        // the Recorder's: exchanges committed or lost
	delay     prometheus.Histogram // exchange end → handed to the outbox
	batch     []hindsight.Step     // run's, reused
	// ledger settles the owed exchanges whose steps could not be built
	// (every exchange on the queue is owed: see Recorder.Hook); nil: none.
	ledger *spool.Spool

	mu         sync.Mutex    // guards the fields below; ready waits on it
	ready      *sync.Cond    // a result arrived, or allIn was set
	results    arrivals      // arrival → built step, from committed on
	dispatched uint64        // arrivals queued, known once allIn
	allIn      bool          // the workers finished (the queue is closed)
	committed  uint64        // arrivals committed
	progress   chan struct{} // closed and replaced after each commit

	done chan struct{} // closed when run returns
}

func newCommitter(waitRoom func(), store func([]hindsight.Step), c *counters, calls *callCounters, processed *atomic.Int64, delay prometheus.Histogram) *committer {
	m := &committer{waitRoom: waitRoom, store: store, tagger: NewTagger(), c: c, calls: calls, processed: processed, delay: delay,
		batch:    make([]hindsight.Step, 0, commitBatch),
		progress: make(chan struct{}), done: make(chan struct{})}
	m.ready = sync.NewCond(&m.mu)
	return m
}

// put hands over the steps built for a chunk, steps[i] for chunk[i].
func (m *committer) put(chunk []queued, steps []*hindsight.Step) {
	m.mu.Lock()
	for i, q := range chunk {
		m.results.put(m.committed, q.arrival, built{step: steps[i], size: q.size})
	}
	m.ready.Broadcast()
	m.mu.Unlock()
}

// finish says the workers are done: n exchanges were queued in all, and
// run returns once they are committed.
func (m *committer) finish(n uint64) {
	m.mu.Lock()
	m.dispatched = n
	m.allIn = true
	m.ready.Broadcast()
	m.mu.Unlock()
}

// progressed returns a channel closed at the next commit.
func (m *committer) progressed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.progress
}

// run takes built steps in arrival order, tags them and stores them in
// batches, until finish and the last of them; then it closes done.
func (m *committer) run() {
	defer close(m.done)
	for {
		m.mu.Lock()
		for !m.readyAt(m.committed) && !(m.allIn && m.committed >= m.dispatched) {
			m.ready.Wait()
		}
		if m.allIn && m.committed >= m.dispatched {
			m.mu.Unlock()
			return
		}
		batch := m.batch[:0]
		lost := 0
		var size int64
		for len(batch) < commitBatch {
			b, ok := m.results.take(m.committed)
			if !ok {
				break
			}
			m.committed++
			size += b.size
			if b.step == nil {
				lost++
				continue
			}
			batch = append(batch, *b.step)
		}
		m.mu.Unlock()
		m.commit(batch, lost, size)
		if len(batch)+lost < commitBatch {
			time.Sleep(commitLinger)
		}
	}
}

// commit tags and stores batch, and counts it with the lost steps that
// were taken out of it (size is the queue bound all of them held).
func (m *committer) commit(batch []hindsight.Step, lost int, size int64) {
	m.waitRoom()
	m.storeMu.Lock()
	m.tagAndStore(batch, m.store)
	m.storeMu.Unlock()
	m.batch = batch
	m.c.queued.Add(-int64(len(batch) + lost))
	m.c.queuedBytes.Add(-size)
	m.c.losses.Lose(losses.Encode, int64(lost), "building the step panicked")
	m.ledger.Settle(lost)
	m.processed.Add(int64(len(batch) + lost))
	clear(batch) // the outbox keeps the encodings; let the bodies go
	m.mu.Lock()
	close(m.progress)
	m.progress = make(chan struct{})
	m.mu.Unlock()
}

// commitNow tags batch and hands it to store at once, on the caller's
// goroutine, between the committer's batches (the Recorder's Record: the
// queue is empty, or what it holds waited too long and comes after).
func (m *committer) commitNow(batch []hindsight.Step, store func([]hindsight.Step)) {
	m.storeMu.Lock()
	m.tagAndStore(batch, store)
	m.storeMu.Unlock()
}

// tagAndStore tags batch, hands it to store and counts it. m.storeMu is
// held.
func (m *committer) tagAndStore(batch []hindsight.Step, store func([]hindsight.Step)) {
	var redactions, truncated int64
	for i := range batch {
		m.tagger.Tag(&batch[i])
		redactions += int64(batch[i].Redactions)
		if len(batch[i].Truncated) > 0 {
			truncated++
		}
	}
	m.calls.observeAll(batch)
	m.c.redactions.Add(redactions)
	if truncated > 0 {
		m.c.truncated.Add(truncated)
		m.c.losses.Note(losses.Truncated, truncated, "a body over the size limit was cut")
	}
	store(batch)
	m.c.captured.Add(int64(len(batch)))
	now := time.Now()
	for i := range batch {
		if !batch[i].EndedAt.IsZero() {
			m.delay.Observe(now.Sub(batch[i].EndedAt).Seconds())
		}
	}
}

// readyAt reports whether arrival a was built (or failed). m.mu is held.
func (m *committer) readyAt(a uint64) bool {
	return m.results.ready(a)
}
