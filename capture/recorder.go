package capture

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxQueueBytes bounds the exchanges waiting for redaction (see
// Options.MaxQueueBytes).
const DefaultMaxQueueBytes = 4 << 20

// Options configure a Recorder. Home is required; everything else has a
// working default.
type Options struct {
	Home         hindsight.Home
	Server       string          // the wrapped server's name, for logs and metric labels
	Namespace    string          // stamped on every step (Step.Namespace): the sidecar's --namespace
	Redactor     *Redactor       // nil: the built-in rules only
	MaxBodyBytes int             // bodies above this are truncated; 0: DefaultMaxBodyBytes
	Deliverer    spool.Deliverer // nil: steps stay in the outbox for DrainOrphans
	Logger       *slog.Logger
	Retention    time.Duration // undelivered steps are kept this long; 0: spool.DefaultRetention
	// Registerer receives the Prometheus metrics (labelled source=<outbox
	// id>); nil registers none. Stats works either way.
	Registerer prometheus.Registerer
	// MaxQueueBytes bounds the exchanges waiting for redaction; 0:
	// DefaultMaxQueueBytes. See Recorder for what happens beyond it.
	MaxQueueBytes int64
	// Workers is the number of redaction goroutines; 0: min(GOMAXPROCS, 4).
	Workers int
	// MaxSpillBytes bounds the exchanges spilled to disk (sealed) while
	// the queue is full; past it they are dropped. 0: DefaultMaxSpillBytes;
	// negative: no spill, a full queue drops.
	MaxSpillBytes int64
	// MaxHeldBytes, DiskReserve and MaxMemBytes are the outbox's (see
	// spool.Options).
	MaxHeldBytes int
	DiskReserve  int64
	MaxMemBytes  int
	// QueueOnly has Record leave every exchange to the queue, owed in the
	// outbox's ledger, as when the outbox cannot journal: for measurements
	// and tests of that path.
	QueueOnly bool
}

// A Recorder turns the exchanges a sidecar relays into redacted, tagged
// steps and stores them in the sidecar's outbox (a spool.Spool), from which they are
// delivered to the daemon. It composes four parts, each with its
// goroutines:
//
//   - the intake: Hook appends the exchange to an in-memory queue and
//     returns at once, waking nothing but, for the first exchange of a
//     batch, the dispatcher, which hands the queue to the workers
//     handOffLinger later (or once handOffBatch exchanges wait, or Sync
//     asks; commitLinger while the outbox cannot journal);
//   - the builder's workers, which redact and build steps in parallel;
//   - the committer, which tags and numbers them on one goroutine in the
//     order the exchanges completed and hands each batch to the outbox.
//     The outbox writes it to its journal, delivers it to the daemon from
//     memory and writes to Badger what the daemon has not taken in time
//     (see spool.Spool; Stats and the hindsight_capture_* metrics show the
//     queue);
//   - the spiller, which takes the exchanges that find the queue full.
//
// What is lost on the way in is counted and logged by drops, and the loss
// ledger is written every ledgerInterval.
//
// The queue is bounded by MaxQueueBytes, built steps included. Redacting
// on the caller's goroutine would stall the relay, so when the queue is
// full exchanges spill to disk: a background writer seals each one with
// AES-256-GCM under a random key that exists only in this process's
// memory and appends it to a segment file (0600) under the outbox's
// spill/ directory, so no secret reaches the disk readable. From then on
// every exchange takes that path, so the order is kept, until the spill
// has been read back: a background reader opens the exchanges in order
// and queues them for redaction as room frees up, deleting each segment
// once read through. Stats.ExchangesSpilled/ExchangesUnspilled
// (hindsight_capture_spilled_total, _unspilled_total) count them and a
// log line, at most every ten seconds, says capture is spilling. A crash
// loses what is spilled (the key died with the process): the next sidecar
// or the daemon deletes it unread and counts it (SpillLost). Past
// MaxSpillBytes, or when the spill writer is more than spillQueueBytes
// behind too, exchanges are dropped, counted in Stats.Dropped (and
// hindsight_capture_dropped_total) and logged. Steps handed to the outbox
// are delivered from memory and written to disk when the daemon does not
// acknowledge them in time (see spool.Spool); if the disk fails they are held
// in memory up to a bound.
type Recorder struct {
	opts   Options
	log    *slog.Logger
	outbox *spool.Spool
	c      *counters
	colls  []prometheus.Collector
	calls  callCounters // recorded steps by tool, failures by code (Calls)

	in     *intake    // Hook → the workers
	build  *builder   // the workers: redact and build
	commit *committer // order, tag, hand to the outbox
	spill  *spiller   // what finds the queue full
	drops  *drops     // exchanges lost on the way in
	ledger *ledgerFlusher

	// Sync waits for processed to reach accepted.
	accepted  atomic.Int64 // exchanges queued or spilled by Hook
	processed atomic.Int64 // exchanges committed or lost after they were accepted

	mu     sync.RWMutex // guards closed against Hook's send
	closed bool
}

// New starts a Recorder with a new outbox under opts.Home.
func New(opts Options) (*Recorder, error) {
	if opts.Home == "" {
		return nil, errors.New("new recorder: no home directory")
	}
	if opts.MaxQueueBytes <= 0 {
		opts.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Workers <= 0 {
		opts.Workers = min(runtime.GOMAXPROCS(0), 4)
	}
	if opts.MaxSpillBytes == 0 {
		opts.MaxSpillBytes = DefaultMaxSpillBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	red := opts.Redactor
	if red == nil {
		var err error
		if red, err = NewRedactor(RedactorConfig{}); err != nil {
			return nil, fmt.Errorf("new recorder: %w", err)
		}
	}
	c := &counters{}
	ob, err := spool.Open(spool.Options{Home: opts.Home, Deliverer: opts.Deliverer, Logger: log, Retention: opts.Retention,
		MaxHeldBytes: opts.MaxHeldBytes, DiskReserve: opts.DiskReserve, MaxMemBytes: opts.MaxMemBytes})
	if err != nil {
		return nil, fmt.Errorf("new recorder: %w", err)
	}
	// Losses are recorded durably from here on (see internal/losses); a
	// ledger that cannot be created leaves them in the counters only.
	if l, err := losses.Open(string(opts.Home), ob.ID(), opts.Server); err != nil {
		log.Warn("losses of this sidecar are counted but not recorded for hindsight status", "err", err)
	} else {
		c.losses.SetLedger(l)
		ob.RecordLosses(l)
	}
	colls, err := c.register(opts.Registerer, ob)
	if err != nil {
		ob.Close(context.Background())
		c.losses.Ledger().Close(true)
		return nil, fmt.Errorf("register capture metrics: %w", err)
	}
	r := &Recorder{opts: opts, log: log.With("component", "capture", "server", opts.Server, "outbox", ob.ID()),
		outbox: ob, c: c, colls: colls}
	commitDelay := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "hindsight_capture_commit_delay_seconds",
		Help:        "Time from an exchange's end to its step being stored in the outbox.",
		ConstLabels: prometheus.Labels{"source": ob.ID()},
		Buckets:     []float64{.0005, .001, .0025, .005, .01, .02, .05, .1, .25, 1},
	})
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(commitDelay); err == nil {
			r.colls = append(r.colls, commitDelay)
		}
	}
	r.drops = &drops{c: c, log: r.log}
	r.in = newIntake(c, opts.MaxQueueBytes, opts.Workers, ob.Journaling)
	r.build = &builder{red: red, maxBody: opts.MaxBodyBytes, namespace: opts.Namespace, log: r.log}
	r.commit = newCommitter(r.outbox.WaitRoom, r.outbox.AppendOwed, c, &r.calls, &r.processed, commitDelay)
	r.commit.ledger = r.outbox
	r.spill = newSpiller(r.in, r.drops, &r.processed, r.commit.progressed,
		r.outbox.SpillDir(), opts.MaxSpillBytes)
	r.spill.ledger = r.outbox
	r.spill.start()
	go r.in.dispatch()
	r.build.start(opts.Workers, r.in, r.commit)
	go r.commit.run()
	r.ledger = startLedgerFlush(c, r.log)
	return r, nil
}

// Source is the outbox id, the Source of every step this Recorder stores.
func (r *Recorder) Source() string { return r.outbox.ID() }

// NoteEnd notes in the outbox an end the daemon could not be told (see
// spool.Spool.NoteEnd); call it after Sync, so the outbox holds the steps
// before it.
func (r *Recorder) NoteEnd(e spool.End) error { return r.outbox.NoteEnd(e) }

// DeliverEnds tells the daemon the ends noted in the outbox (see
// spool.Spool.DeliverEnds).
func (r *Recorder) DeliverEnds(ctx context.Context) error { return r.outbox.DeliverEnds(ctx) }

// Stats returns the Recorder's counters.
func (r *Recorder) Stats() Stats { return r.c.snapshot(r.outbox.Counts()) }

// Hook queues a finished exchange for recording. It never blocks and never
// fails; install it as proxy.Hooks.Exchange.
func (r *Recorder) Hook(ex *proxy.Exchange) {
	if ex == nil {
		return
	}
	if ex.Recorded {
		// Record journaled it before its answer was relayed; delivery
		// starts now that the answer is out.
		r.outbox.Signal()
		return
	}
	size := exchangeSize(ex)
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !ex.Owed {
		// Not through Record (a path without it): owed from here on.
		r.owe([]*proxy.Exchange{ex})
	}
	if r.closed {
		r.drops.drop("recorder closed")
		r.outbox.Settle(1)
		return
	}
	if !r.spill.active() && r.in.tryQueue(ex, size) {
		r.accepted.Add(1)
		return
	}
	if r.opts.MaxSpillBytes < 0 {
		r.drops.drop("capture queue full")
		r.outbox.Settle(1)
		return
	}
	if r.spill.take(ex, size) {
		r.accepted.Add(1)
	} else {
		r.outbox.Settle(1) // dropped and counted
	}
}

// Sync waits until every exchange queued (or spilled) before it has been
// handed to the outbox, or ctx is done; it hands the queue to the workers
// at once rather than after the linger. With no Deliverer, or while the
// daemon is unreachable, the outbox has written them to its database by
// then; otherwise to its journal (or, when that cannot be written, they are
// acknowledged or in the database within the spool's PersistAfter).
func (r *Recorder) Sync(ctx context.Context) error {
	target := r.accepted.Load()
	r.in.hurry() // no linger: hand the queue over now
	for {
		progress := r.commit.progressed()
		if r.processed.Load() >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sync capture: %w", ctx.Err())
		case <-r.commit.done:
			return nil
		case <-progress:
		}
	}
}

// Close stops recording: exchanges still queued are recorded, then the
// outbox delivers what it can until ctx is done and closes. Exchanges
// handed to Hook after Close are dropped (and counted).
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.spill.closeIntake()
	r.mu.Unlock()
	var err error
	// The spill is read back into the queue before it closes.
	r.spill.wait(ctx)
	r.in.close()
	select {
	case <-r.commit.done:
	case <-ctx.Done():
		err = fmt.Errorf("close recorder: %d exchanges not recorded: %w", r.c.queued.Load(), ctx.Err())
		r.log.Error("capture closed before its queue was recorded", "queued", r.c.queued.Load())
		// The pipeline keeps running into the outbox below until it is
		// closed; what it has not reached is lost.
	}
	if e := r.outbox.Close(ctx); e != nil && err == nil {
		err = e
	}
	r.ledger.close()
	if e := r.c.losses.Ledger().Close(true); e != nil {
		r.log.Warn("record lost steps", "err", e)
	}
	for _, c := range r.colls {
		r.opts.Registerer.Unregister(c)
	}
	return err
}
