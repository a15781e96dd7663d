package capture

import (
	"context"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// recordWait bounds how long Record waits for the exchanges queued before
// its own to be committed first (so that steps keep the order their
// exchanges completed in). Past it, Record leaves its exchanges to Hook,
// which queues them after the others.
const recordWait = 2 * time.Millisecond

// Record records exs, the exchanges whose answers the relay is about to
// write to the agent, before it does: install it as proxy.Hooks.Record. It
// redacts and builds their steps on the caller's goroutine and has the
// outbox journal them with one write (spool.Spool.AppendJournaled), so a
// sidecar killed the moment the agent read its answers has them on disk,
// and the next sidecar or the daemon delivers them. It marks each exchange
// it took (proxy.Exchange.Recorded); Hook, which the proxy calls once the
// answers are written, records those no more and starts their delivery
// (spool.Spool.Signal), so both must be installed.
//
// It leaves exs to Hook, and so to the queue (recorded within about 25 ms,
// as before), counted first in the outbox's ledger (see owe), when the
// outbox cannot journal now (the journal was given
// up, the daemon is behind), when capture is spilling, or when exchanges
// queued before these are not committed within recordWait (at once when
// they wait for the outbox's room: see spool.Spool.WaitRoom), so that the
// relay never waits longer than that. A step whose
// building panics is lost and counted (losses "encode"), as on the queue.
func (r *Recorder) Record(exs []*proxy.Exchange) {
	if len(exs) == 0 {
		return
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed || r.opts.QueueOnly || r.spill.active() || !r.outbox.JournalRoom() {
		r.owe(exs)
		return
	}
	if r.accepted.Load() > r.processed.Load() {
		if r.outbox.Crowded() {
			r.owe(exs) // the queue waits for the outbox's room: these join it
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordWait)
		err := r.Sync(ctx)
		cancel()
		if err != nil {
			r.owe(exs)
			return
		}
	}
	steps := make([]hindsight.Step, len(exs))
	n := 0
	for _, ex := range exs {
		ex.Recorded = true
		if r.build.build(ex, &steps[n]) == nil {
			steps[n] = hindsight.Step{}
			continue
		}
		n++
	}
	if lost := len(exs) - n; lost > 0 {
		r.c.losses.Lose(losses.Encode, int64(lost), "building the step panicked")
	}
	r.commit.commitNow(steps[:n], r.outbox.AppendJournaled)
}

// owe counts the exchanges of exs not yet recorded nor owed in the
// outbox's ledger (spool.Spool.Owe) and marks them Owed: Hook queues them
// after their answers are relayed, and a sidecar killed before their steps
// are safe has them counted lost by the drainer of its outbox.
func (r *Recorder) owe(exs []*proxy.Exchange) {
	n := 0
	for _, ex := range exs {
		if !ex.Recorded && !ex.Owed {
			ex.Owed = true
			n++
		}
	}
	r.outbox.Owe(n)
}
