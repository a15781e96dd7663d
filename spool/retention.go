package spool

import (
	"encoding/binary"
	"encoding/json"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/losses"
)

// retention is the state of the retention passes (enforceRetention),
// guarded by retMu, which also keeps passes from overlapping.
type retention struct {
	retMu       sync.Mutex
	lastWarn    time.Time // last retention warning
	warnedClock bool      // logged a clock jump once
	opened      time.Time // when this process opened its own spool (monotonic); zero for orphans
}

// enforceRetention drops undelivered steps older than the retention period
// and warns when the oldest one nears it.
func (o *Spool) enforceRetention() {
	db := o.db.Load()
	if db == nil {
		return // nothing was written
	}
	o.retMu.Lock()
	defer o.retMu.Unlock()
	now := time.Now()
	// This process wrote every step of its own outbox, so none can be
	// older than its uptime (a monotonic clock): a wall clock that jumps
	// forward must not expire them.
	maxAge := time.Duration(1<<63 - 1)
	if !o.opened.IsZero() {
		maxAge = time.Since(o.opened)
	}
	var expired [][]byte
	var oldest time.Time
	_ = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixStep}, PrefetchValues: true, PrefetchSize: 16})
		defer it.Close()
		// Steps are stored in time order: stop at the first one still kept.
		for it.Rewind(); it.Valid(); it.Next() {
			var s struct {
				EndedAt time.Time `json:"ended_at"`
			}
			_ = it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &s) })
			if age := now.Sub(s.EndedAt); age <= o.opts.Retention || maxAge <= o.opts.Retention {
				// Only an outbox this process opened knows its age (a
				// drainer's maxAge is unbounded, and adding to it
				// overflowed into a false alarm).
				if !o.opened.IsZero() && age > maxAge+time.Minute && !o.warnedClock {
					o.warnedClock = true
					o.log.Warn("step timestamps are older than this sidecar: the clock jumped; retention counts from the sidecar's start", "ended_at", s.EndedAt, "uptime", maxAge.String())
				}
				oldest = s.EndedAt
				break
			}
			expired = append(expired, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if len(expired) > 0 && o.checkSpace(int64(len(expired))*32) == nil {
		o.wmu.Lock() // what is on disk changes
		defer o.wmu.Unlock()
		wb := db.NewWriteBatch()
		for _, k := range expired {
			_ = wb.Delete(k)
		}
		if err := wb.Flush(); err == nil {
			gone := make([]uint64, 0, len(expired))
			for _, k := range expired {
				gone = append(gone, binary.BigEndian.Uint64(k[1:]))
			}
			o.mu.Lock()
			o.forget(gone)
			o.mu.Unlock()
			o.c.expired.Add(int64(len(expired)))
			o.c.losses.Note(losses.Expired, int64(len(expired)), "undelivered past the retention period "+o.opts.Retention.String())
			o.c.depth.Add(-int64(len(expired)))
			o.log.Error("undelivered steps passed the retention period and were removed", "steps", len(expired), "retention", o.opts.Retention.String())
		}
	}
	if !oldest.IsZero() && now.Sub(oldest) > o.opts.Retention*8/10 && now.Sub(o.lastWarn) > time.Hour {
		o.lastWarn = now
		o.log.Warn("undelivered steps near the retention period; start the daemon (hindsight daemon) or they will be removed",
			"oldest", oldest, "removed_after", oldest.Add(o.opts.Retention), "depth", o.c.depth.Load())
	}
}
