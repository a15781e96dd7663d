package spool

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"
)

// A Deliverer sends steps to the daemon. Deliver must be idempotent per
// (Source, Seq): a batch whose answer was lost is sent again. It must
// return when ctx is done: the outbox bounds each attempt (30 s) and its
// final drain by ctx. It returns an
// error wrapping ErrRejected when the daemon received the batch but refuses
// it for good (bad data); any other error means "try again later".
type Deliverer interface {
	Deliver(ctx context.Context, steps []hindsight.Step) error
}

// A RawDeliverer is a Deliverer that also takes steps as the outbox stores
// them: each one's JSON encoding (of a hindsight.Step). The outbox calls
// DeliverRaw instead of Deliver when its Deliverer has it, so that a step
// is encoded once, when it is stored, and never decoded in the sidecar.
// DeliverRaw has Deliver's contract.
type RawDeliverer interface {
	Deliverer
	DeliverRaw(ctx context.Context, steps []json.RawMessage) error
}

// ErrRejected marks a batch the daemon will never accept. The outbox then
// delivers the batch's steps one by one and sets the refused ones aside.
var ErrRejected = errors.New("steps rejected")

const (
	// journalLinger replaces deliverLinger while the journal works: one
	// daemon round trip every quarter of a second instead of one every
	// 10 ms while an agent makes calls.
	journalLinger = 250 * time.Millisecond
	// deliverLinger is how long delivery waits after a step arrives for
	// more to join its batch: one daemon round trip per batch instead of
	// per step while an agent makes calls one at a time (each round trip
	// wakes the daemon and its database). It leaves PersistAfter 20 ms for
	// the daemon's answer.
	deliverLinger  = 10 * time.Millisecond
	deliverTimeout = 30 * time.Second // one delivery attempt
	maxBackoff     = 30 * time.Second // between failed attempts
)

// ErrDaemonFull marks a delivery the daemon refused because its own disk is
// short of space: the outbox holds the steps and tries again within a
// second, instead of backing off for up to maxBackoff.
var ErrDaemonFull = errors.New("the daemon's disk is short of space")

// daemonFullRetry caps the delivery backoff after ErrDaemonFull.
const daemonFullRetry = time.Second

// linger is how long delivery waits for a batch to fill (see journal).
func (o *Spool) linger() time.Duration {
	if o.journalOn.Load() {
		return journalLinger
	}
	return deliverLinger
}

// lingerFor waits for a batch to fill: linger, or until a full batch is
// waiting. It reports whether Close began draining, and whether ctx is done.
func (o *Spool) lingerFor(ctx context.Context) (draining, done bool) {
	t := time.NewTimer(o.linger())
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return false, false
		case <-o.notify:
			o.mu.Lock()
			full := len(o.mem)+o.diskOnly >= o.opts.BatchSize
			o.mu.Unlock()
			if full {
				return false, false
			}
		case <-o.draining:
			return true, false
		case <-ctx.Done():
			return false, true
		}
	}
}

// deliverLoop sends stored steps to the Deliverer, in order, until the
// outbox is closed and empty (or the close deadline passes).
func (o *Spool) deliverLoop(ctx context.Context) {
	defer close(o.loopDone)
	bo := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(maxBackoff),
		backoff.WithMaxElapsedTime(0))
	retention := time.NewTicker(time.Minute)
	defer retention.Stop()
	o.enforceRetention()
	draining := false
	for {
		if ctx.Err() != nil {
			return
		}
		var batch []entry
		if o.opts.Deliverer != nil {
			batch = o.nextBatch(o.opts.BatchSize)
		}
		if len(batch) == 0 {
			if draining {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-o.notify:
				var stop bool
				if draining, stop = o.lingerFor(ctx); stop {
					return
				}
			case <-o.draining:
				draining = true
			case <-retention.C:
				o.enforceRetention()
				o.closeIdleDisk(time.Now())
			}
			continue
		}
		err := o.deliver(ctx, batch)
		if err == nil {
			bo.Reset()
			continue
		}
		wait := bo.NextBackOff()
		if errors.Is(err, ErrDaemonFull) {
			wait = min(wait, daemonFullRetry)
		}
		select {
		case <-ctx.Done():
			return
		case <-o.draining:
			draining = true
			// Keep retrying until the close deadline cancels ctx.
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		case <-time.After(wait):
		case <-retention.C:
			o.enforceRetention()
			o.closeIdleDisk(time.Now())
		}
	}
}

// deliver sends one batch and removes what was accepted.
func (o *Spool) deliver(ctx context.Context, batch []entry) error {
	err := o.send(ctx, batch)
	switch {
	case err == nil:
		o.remove(batch)
		o.c.delivered.Add(int64(len(batch)))
		o.setFailed(false, nil)
		return nil
	case errors.Is(err, ErrRejected):
		o.setFailed(false, nil)
		o.isolate(ctx, batch, err)
		return nil
	default:
		o.c.deliveryFailures.Add(1)
		o.setFailed(true, err)
		return err
	}
}

// send hands a batch to the Deliverer: as stored when it is a
// RawDeliverer, decoded otherwise.
func (o *Spool) send(ctx context.Context, batch []entry) (err error) {
	ctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("deliverer panicked: %v", r)
		}
	}()
	if rd, ok := o.opts.Deliverer.(RawDeliverer); ok {
		return rd.DeliverRaw(ctx, raws(batch))
	}
	steps := make([]hindsight.Step, len(batch))
	for i, e := range batch {
		if err := wire.UnmarshalCompact(e.raw, &steps[i]); err != nil {
			return fmt.Errorf("%w: decode step %d: %v", ErrRejected, e.seq, err)
		}
	}
	return o.opts.Deliverer.Deliver(ctx, steps)
}

// isolate delivers a refused batch one step at a time and sets aside the
// steps the daemon refuses, so one bad step cannot hold back the rest.
func (o *Spool) isolate(ctx context.Context, batch []entry, batchErr error) {
	if len(batch) == 1 {
		o.reject(ctx, batch[0], batchErr)
		return
	}
	for _, e := range batch {
		err := o.send(ctx, []entry{e})
		switch {
		case err == nil:
			o.remove([]entry{e})
			o.c.delivered.Add(1)
		case errors.Is(err, ErrRejected):
			o.reject(ctx, e, err)
		default:
			o.c.deliveryFailures.Add(1)
			return // the rest stays queued, in order
		}
	}
}

func (o *Spool) setFailed(failed bool, err error) {
	o.mu.Lock()
	was := o.lastFailed
	o.lastFailed = failed
	if failed && !was {
		o.freed() // WaitRoom: nothing will free memory soon
	}
	o.mu.Unlock()
	switch {
	case failed && !was:
		o.log.Warn("daemon unreachable; steps stay in the outbox and delivery retries with backoff", "err", err, "depth", o.c.depth.Load())
	case !failed && was:
		o.log.Info("daemon reachable again; delivering the outbox")
	}
}

// nextBatch returns up to n undelivered steps in seq order: from disk
// first, then from memory. When every stored undelivered step is still in
// memory, Badger is not read at all.
func (o *Spool) nextBatch(n int) []entry {
	var out []entry
	o.mu.Lock()
	fromMem := o.diskOnly == 0
	if fromMem {
		out = append(out, o.mem[:min(n, len(o.mem))]...)
	}
	o.mu.Unlock()
	if db := o.db.Load(); db != nil && !fromMem {
		o.mu.Lock()
		from := stepKey(prefixStep, o.removed+1)
		o.mu.Unlock()
		err := db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixStep}, PrefetchValues: true, PrefetchSize: 64})
			defer it.Close()
			// Seeking past the delivered steps skips their tombstones,
			// which Rewind would walk through until a compaction.
			for it.Seek(from); it.Valid() && len(out) < n; it.Next() {
				k := it.Item().Key()
				v, err := it.Item().ValueCopy(nil)
				// Only a cheap check: the daemon refuses a step that does
				// not decode, and the outbox then sets it aside.
				if err == nil && (len(k) != 9 || len(v) < 2 || v[0] != '{' || v[len(v)-1] != '}') {
					err = errors.New("not a JSON object")
				}
				if err != nil {
					o.log.Error("undecodable step in outbox; removed", "key", hex.EncodeToString(k), "err", err)
					k := it.Item().KeyCopy(nil)
					go db.Update(func(txn *badger.Txn) error { return txn.Delete(k) })
					continue
				}
				out = append(out, entry{seq: binary.BigEndian.Uint64(k[1:]), raw: v})
			}
			return nil
		})
		if err != nil {
			o.log.Error("read outbox", "err", err)
		}
	}
	if !fromMem && len(out) < n {
		// The steps on disk are followed by those in memory.
		o.mu.Lock()
		for _, e := range o.mem {
			if len(out) >= n {
				break
			}
			if len(out) > 0 && e.seq <= out[len(out)-1].seq {
				continue
			}
			out = append(out, e)
		}
		o.mu.Unlock()
	}
	return out
}

// remove deletes delivered steps from memory, and from disk those that
// were written there.
func (o *Spool) remove(steps []entry) {
	o.wmu.Lock()
	defer o.wmu.Unlock()
	o.mu.Lock()
	del := o.onDisk(steps)
	o.mu.Unlock()
	if db := o.db.Load(); db != nil && len(del) > 0 && o.checkSpace(int64(len(del))*32) == nil {
		// While space is short the delivered steps stay in the database
		// (the daemon drops them if they are delivered again).
		wb := db.NewWriteBatch()
		for _, e := range del {
			_ = wb.Delete(stepKey(prefixStep, e.seq))
		}
		if err := wb.Flush(); err != nil {
			o.log.Error("remove delivered steps from outbox", "err", err)
		}
	}
	o.mu.Lock()
	gone := o.goneSeqs[:0]
	for _, e := range steps {
		gone = append(gone, e.seq)
		o.removed = max(o.removed, e.seq)
	}
	o.forget(gone)
	o.goneSeqs = gone
	o.freed()
	o.mu.Unlock()
	o.releaseJournal()
	o.c.depth.Add(-int64(len(steps)))
}
