package memory

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultHitFlush is how often the hits of searches are written to the
// experience store when Service.HitFlush is zero.
const DefaultHitFlush = 2 * time.Second

// hitsPendingKey holds, in the trace database, how many hits wait in
// memory: what is there at start was lost by a daemon that died.
var hitsPendingKey = []byte("hitqueue/pending")

// hitQueue gathers the hits searches count, so that a search answers
// without writing to the experience store: they are written in one
// RecordHits per namespace every Service.HitFlush and at shutdown (through
// the store-op queue while the store is unreachable). How many wait is
// kept in the trace database (not synced: a crash may lose the last
// count), so that a daemon that died with hits waiting counts them lost
// at its next start. Reads through the Service add the waiting hits.
type hitQueue struct {
	mu      sync.Mutex
	pending map[hitKey]*hitCount
	n       int // hits waiting
	db      *badger.DB

	queued, flushed, lost prometheus.Counter
}

type hitKey struct{ ns, id string }

type hitCount struct {
	n    int
	last time.Time
}

func newHitQueue(db *badger.DB) *hitQueue {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &hitQueue{pending: map[hitKey]*hitCount{}, db: db,
		queued:  c("hindsight_daemon_hits_queued_total", "Hits of searches queued to be written to the experience store."),
		flushed: c("hindsight_daemon_hits_flushed_total", "Queued hits handed to the experience store (or its write queue)."),
		lost:    c("hindsight_daemon_hits_lost_total", "Queued hits lost: the daemon died before writing them, or the store refused them."),
	}
}

func (q *hitQueue) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.queued, q.flushed, q.lost}
}

// recover counts the hits a daemon that died left waiting, and returns
// how many.
func (q *hitQueue) recover() int {
	if q.db == nil {
		return 0
	}
	n := 0
	_ = q.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(hitsPendingKey)
		if err != nil {
			return nil
		}
		_ = item.Value(func(v []byte) error {
			if len(v) == 8 {
				n = int(binary.BigEndian.Uint64(v))
			}
			return nil
		})
		return txn.Delete(hitsPendingKey)
	})
	q.lost.Add(float64(n))
	return n
}

// note records how many hits wait (called with q.mu held).
func (q *hitQueue) note() {
	if q.db == nil {
		return
	}
	v := binary.BigEndian.AppendUint64(nil, uint64(q.n))
	_ = q.db.Update(func(txn *badger.Txn) error { return txn.Set(hitsPendingKey, v) })
}

// add queues a hit at at on each of ids in ns.
func (q *hitQueue) add(ns string, ids []string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		k := hitKey{ns, id}
		c := q.pending[k]
		if c == nil {
			c = &hitCount{}
			q.pending[k] = c
		}
		c.n++
		if at.After(c.last) {
			c.last = at
		}
	}
	q.n += len(ids)
	q.queued.Add(float64(len(ids)))
	q.note()
}

// waiting returns the hits waiting on ns/id and the latest.
func (q *hitQueue) waiting(ns, id string) (int, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if c := q.pending[hitKey{ns, id}]; c != nil {
		return c.n, c.last
	}
	return 0, time.Time{}
}

// overlay adds the hits waiting on e to it.
func (q *hitQueue) overlay(e *hindsight.Experience) {
	n, last := q.waiting(e.Namespace, e.ID)
	if n == 0 {
		return
	}
	e.HitCount += n
	if e.LastHitAt == nil || last.After(*e.LastHitAt) {
		l := last.UTC()
		e.LastHitAt = &l
	}
}

// flush hands the waiting hits to record, one call per namespace (an id
// repeated once per hit, at the latest hit's time); those record fails
// to write are counted lost.
func (q *hitQueue) flush(record func(ns string, ids []string, at time.Time) error) {
	q.mu.Lock()
	byNS := map[string][]string{}
	lastNS := map[string]time.Time{}
	for k, c := range q.pending {
		for range c.n {
			byNS[k.ns] = append(byNS[k.ns], k.id)
		}
		if c.last.After(lastNS[k.ns]) {
			lastNS[k.ns] = c.last
		}
	}
	n := q.n
	q.pending, q.n = map[hitKey]*hitCount{}, 0
	q.mu.Unlock()
	if n == 0 {
		return
	}
	for ns, ids := range byNS {
		slices.Sort(ids)
		if record(ns, ids, lastNS[ns]) != nil {
			q.lost.Add(float64(len(ids)))
		}
	}
	q.flushed.Add(float64(n))
	q.mu.Lock()
	q.note()
	q.mu.Unlock()
}

// FlushHits writes the hits searches counted and that wait in memory
// (Run does so every HitFlush, Close at the end).
func (s *Service) FlushHits(ctx context.Context) {
	s.init()
	s.hits.flush(func(ns string, ids []string, at time.Time) error { return s.recordHits(ctx, ns, ids, at) })
}
