package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/defaults"
)

// The apply loop of Ops: passes over the queue, the backoff between
// them, and what becomes of an op the store does not take.

// Kick asks Run for a pass now.
func (o *Ops) Kick() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Run applies waiting ops until ctx ends: a pass whenever an op is queued,
// and, while the store is unreachable, again after each backoff wait.
func (o *Ops) Run(ctx context.Context) {
	b := o.newBackoff()
	for {
		wait := time.Duration(-1) // until kicked
		if err := o.Drain(ctx); errors.Is(err, hindsight.ErrStoreUnavailable) || errors.Is(err, errRefusedForNow) {
			wait = b.NextBackOff()
		} else {
			b.Reset()
		}
		var t *time.Timer
		var tc <-chan time.Time
		if wait >= 0 {
			t = time.NewTimer(wait)
			tc = t.C
		}
		select {
		case <-ctx.Done():
		case <-o.kick:
		case <-tc:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// newBackoff returns the wait between passes while the store is
// unreachable: doubling from Backoff, capped at MaxBackoff, never giving
// up.
func (o *Ops) newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = defaults.Positive(o.Backoff, DefaultOpsBackoff)
	b.MaxInterval = defaults.Positive(o.MaxBackoff, DefaultOpsMaxBackoff)
	b.Multiplier = 2
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// Drain applies waiting ops in order until none is left (nil), the store
// is unreachable (an error wrapping hindsight.ErrStoreUnavailable), refuses
// an op it may take later, or ctx ends; the op that could not be applied
// stays first.
func (o *Ops) Drain(ctx context.Context) error {
	for o.Depth() > 0 {
		op, ok, err := o.first()
		if err != nil || !ok {
			return err
		}
		err = o.Apply(ctx, &op)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			o.done(0)
			return ctx.Err()
		case errors.Is(err, hindsight.ErrStoreUnavailable):
			o.done(0)
			o.setErr(fmt.Sprintf("%s (op %d %s)", err, op.Seq, op.Kind), false)
			return err
		case !o.giveUp(&op):
			o.setErr(fmt.Sprintf("op %d %s refused %d times, tried again: %s", op.Seq, op.Kind, op.Refusals, err), false)
			if derr := o.refused(&op); derr != nil {
				return derr
			}
			return fmt.Errorf("%w: op %d: %w", errRefusedForNow, op.Seq, err)
		default:
			o.log.Warn("store op refused; dropped", "op", op.Seq, "kind", op.Kind, "ids", op.IDs, "refusals", op.Refusals+1, "err", err)
			o.setErr(fmt.Sprintf("op %d %s dropped: %s", op.Seq, op.Kind, err), true)
		}
		if derr := o.done(op.Seq); derr != nil {
			return derr
		}
		if err == nil {
			o.setErr("", false)
		}
	}
	return nil
}

// giveUp counts a refusal of op and reports whether op is to be dropped.
func (o *Ops) giveUp(op *Op) bool {
	now := time.Now().UTC()
	if op.Refusals == 0 {
		op.RefusedSince = now
	}
	op.Refusals++
	return op.Refusals >= minRefusals && now.Sub(op.RefusedSince) >= defaults.Positive(o.RefusedGrace, DefaultOpsRefusedGrace)
}

// refused stores op's count of refusals and clears the mark of the op
// being applied.
func (o *Ops) refused(op *Op) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applying = 0
	if err := o.db.Update(func(txn *badger.Txn) error { return setOp(txn, op) }); err != nil {
		return fmt.Errorf("record store op %d refused: %w", op.Seq, err)
	}
	return nil
}

// first returns the first op and marks it as being applied.
func (o *Ops) first() (Op, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var op Op
	var ok bool
	err := o.db.View(func(txn *badger.Txn) (err error) {
		op, ok, err = o.edgeOp(txn, false)
		return err
	})
	if ok {
		o.applying = op.Seq
	}
	return op, ok, err
}

// done removes op seq from the queue (0: none) and clears the mark of the
// op being applied.
func (o *Ops) done(seq uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applying = 0
	if seq == 0 {
		return nil
	}
	if err := o.db.Update(func(txn *badger.Txn) error { return txn.Delete(storeOpKey(seq)) }); err != nil {
		return fmt.Errorf("remove store op %d: %w", seq, err)
	}
	o.depth.Add(-1)
	return nil
}

// setErr records the last error ("" after an op applied) and counts a
// dropped op.
func (o *Ops) setErr(msg string, dropped bool) {
	o.emu.Lock()
	defer o.emu.Unlock()
	if dropped {
		o.dropped++
	}
	o.lastErr = msg
}
