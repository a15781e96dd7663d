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
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/prometheus/client_golang/prometheus"
)

// Recorder defaults.
const (
	DefaultMaxQueueBytes = 4 << 20
	maxQueueItems        = 1 << 16
	commitBatch          = 256
	// commitLinger spaces the commits of small batches, so that calls made
	// one at a time share a Badger transaction instead of paying one each;
	// it adds at most that much to the time until a step is durable (well
	// within the 50 ms a killed sidecar may lose).
	commitLinger = 2 * time.Millisecond
	// handOffLinger and handOffBatch batch the hand-off from Hook to the
	// workers: the exchanges queued are handed over handOffLinger after
	// the first of them, or as soon as handOffBatch are waiting, in chunks
	// of handOffChunk (a batch that waited its linger goes to one worker,
	// leaving the other processors to the relay). Calls made one at a
	// time then wake the workers and the committer once per batch instead
	// of once or twice per call, which costs the relay less (README,
	// Performance). It adds at most handOffLinger to the time until a
	// step is durable, so it applies only while the outbox journals
	// (spool.Spool.Journaling): a step not journaled must be acknowledged or
	// written within its PersistAfter, counted from the exchange's end,
	// and is handed over after commitLinger.
	handOffLinger = 20 * time.Millisecond
	handOffBatch  = commitBatch
	handOffChunk  = 64
)

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
}

// A Recorder turns the exchanges a sidecar relays into redacted, tagged
// steps and stores them in the sidecar's outbox (a spool.Spool), from
// which they are delivered to the daemon.
//
// Hook is installed as proxy.Hooks.Exchange and returns at once: it only
// appends the exchange to an in-memory queue, waking nothing but, for the
// first exchange of a batch, the goroutine that hands the queue to the
// workers 20 ms later (or once 256 exchanges wait, or Sync asks; 2 ms
// while the outbox cannot journal). Redaction and step building run on
// background workers (in parallel), tagging and numbering on one committer
// goroutine in the order the exchanges completed, and the committer hands
// each batch to the outbox, which writes it to its journal,
// delivers it to the daemon from memory and writes to Badger what the
// daemon has not taken in time (see spool.Spool; Stats and the
// hindsight_capture_* metrics show the queue).
//
// The queue is bounded by MaxQueueBytes. Redacting on the caller's
// goroutine would stall the relay, so when the queue is full — capture is
// more than 4 MiB behind — exchanges spill to disk: a background writer
// seals each one with AES-256-GCM under a random key that exists only in
// this process's memory and appends it to a segment file (0600) under the
// outbox's spill/ directory, so no secret reaches the disk readable. From
// then on every exchange takes that path, so the order is kept, until the
// spill has been read back: a background reader opens the exchanges in
// order and queues them for redaction as room frees up, deleting each
// segment once read through. Stats.ExchangesSpilled/ExchangesUnspilled
// (hindsight_capture_spilled_total, _unspilled_total) count them and a
// log line, at most every ten seconds, says capture is spilling. A crash
// loses what is spilled (the key died with the process): the next sidecar
// or the daemon deletes it unread and counts it (SpillLost). Past
// MaxSpillBytes, or when the spill writer is more than 16 MiB behind too,
// exchanges are dropped, counted in Stats.Dropped (and
// hindsight_capture_dropped_total) and logged. Steps handed to the outbox
// are delivered from memory and written to disk when the daemon does not
// acknowledge them in time (see spool.Spool); if the disk fails they are held
// in memory up to a bound.
type Recorder struct {
	opts   Options
	log    *slog.Logger
	red    *Redactor
	outbox *spool.Spool
	c      *counters
	tagger *Tagger
	colls  []prometheus.Collector

	ledgerStop, ledgerDone chan struct{} // flushLedger

	// The queue: Hook appends to pending, numbering the exchanges as they
	// enter it (next) so that the committer can restore their order, and
	// the dispatcher hands pending to the workers in chunks on work. kick
	// says pending is no longer empty, full that it holds handOffBatch (or
	// that Sync wants it handed over now).
	qmu          sync.Mutex
	next         uint64
	pending      []queued
	kick, full   chan struct{}
	stopDispatch chan struct{}
	work         chan []queued
	handOff      time.Duration // handOffLinger; tests lengthen it

	mu     sync.RWMutex // guards closed against Hook's send
	closed bool

	rmu        sync.Mutex
	ready      *sync.Cond
	results    map[uint64]built // arrival → built step
	dispatched uint64           // arrivals queued, known once allIn
	allIn      bool             // the workers finished (the queue is closed)
	committed  uint64           // arrivals committed
	done       chan struct{}    // the committer finished
	progress   chan struct{}    // closed and replaced after each commit

	commitDelay prometheus.Histogram // exchange end → handed to the outbox
	calls       callCounters         // recorded steps by tool, failures by code (Calls)
	batch       []hindsight.Step     // the committer's, reused

	accepted  atomic.Int64 // exchanges queued by Hook
	processed atomic.Int64 // exchanges committed (or lost to a panic)

	dropMu   sync.Mutex
	lastDrop time.Time

	// The spill (see above). spillMu orders Hook's choice of path with
	// the reader's end of a spill.
	spillMu      sync.Mutex
	spilling     atomic.Bool // exchanges go to the spill, not the queue
	spillPending int64       // exchanges on the spill path, not yet queued or lost
	spillIn      chan *proxy.Exchange
	spillInBytes atomic.Int64
	spillMore    chan struct{}         // a spilled exchange was written
	sp           atomic.Pointer[spill] // opened at the first spill
	spOnce       sync.Once
	spErr        error
	writerDone   chan struct{}
	unspillDone  chan struct{}
	unspillStop  chan struct{}
	spillLogMu   sync.Mutex
	lastSpillLog time.Time
}

// built is a step waiting for its turn to be committed; step is nil when
// building it failed. size is the exchange's share of the queue bound,
// released at commit so built steps count against it too.
type built struct {
	step *hindsight.Step
	size int64
}

type queued struct {
	ex      *proxy.Exchange
	size    int64
	arrival uint64
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
		c.ledger = l
		ob.RecordLosses(l)
	}
	colls, err := c.register(opts.Registerer, ob)
	if err != nil {
		ob.Close(context.Background())
		c.ledger.Close(true)
		return nil, fmt.Errorf("register capture metrics: %w", err)
	}
	r := &Recorder{opts: opts, log: log.With("component", "capture", "server", opts.Server, "outbox", ob.ID()),
		red: red, outbox: ob, c: c, tagger: NewTagger(), colls: colls,
		kick: make(chan struct{}, 1), full: make(chan struct{}, 1), stopDispatch: make(chan struct{}),
		work: make(chan []queued, opts.Workers), handOff: handOffLinger,
		batch: make([]hindsight.Step, 0, commitBatch), results: map[uint64]built{}, done: make(chan struct{}), progress: make(chan struct{}),
		commitDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:        "hindsight_capture_commit_delay_seconds",
			Help:        "Time from an exchange's end to its step being stored in the outbox.",
			ConstLabels: prometheus.Labels{"source": ob.ID()},
			Buckets:     []float64{.0005, .001, .0025, .005, .01, .02, .05, .1, .25, 1},
		})}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(r.commitDelay); err == nil {
			r.colls = append(r.colls, r.commitDelay)
		}
	}
	r.ready = sync.NewCond(&r.rmu)
	r.spillIn = make(chan *proxy.Exchange, spillQueue)
	r.spillMore = make(chan struct{}, 1)
	r.writerDone, r.unspillDone, r.unspillStop = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go r.spillWriter()
	go r.unspill()
	go r.dispatch()
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker()
		}()
	}
	go func() {
		wg.Wait()
		r.qmu.Lock()
		n := r.next
		r.qmu.Unlock()
		r.rmu.Lock()
		r.dispatched = n
		r.allIn = true
		r.ready.Broadcast()
		r.rmu.Unlock()
	}()
	go r.commit()
	r.ledgerStop, r.ledgerDone = make(chan struct{}), make(chan struct{})
	go r.flushLedger()
	return r, nil
}

// ledgerInterval spaces the writes of the loss ledger.
const ledgerInterval = time.Second

// flushLedger writes the loss ledger every ledgerInterval while it changed.
func (r *Recorder) flushLedger() {
	defer close(r.ledgerDone)
	t := time.NewTicker(ledgerInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ledgerStop:
			return
		case <-t.C:
			if err := r.c.ledger.Flush(); err != nil {
				r.log.Warn("record lost steps", "err", err)
			}
		}
	}
}

// Source is the outbox id, the Source of every step this Recorder stores.
func (r *Recorder) Source() string { return r.outbox.ID() }

// Stats returns the Recorder's counters.
func (r *Recorder) Stats() Stats { return r.c.snapshot(r.outbox.Counts()) }

// Hook queues a finished exchange for recording. It never blocks and never
// fails; install it as proxy.Hooks.Exchange.
func (r *Recorder) Hook(ex *proxy.Exchange) {
	if ex == nil {
		return
	}
	size := exchangeSize(ex)
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		r.drop("recorder closed")
		return
	}
	if !r.spilling.Load() && r.tryQueue(ex, size) {
		r.accepted.Add(1)
		return
	}
	if r.opts.MaxSpillBytes < 0 {
		r.drop("capture queue full")
		return
	}
	r.spillMu.Lock()
	defer r.spillMu.Unlock()
	if !r.spilling.Load() {
		if r.tryQueue(ex, size) {
			r.accepted.Add(1)
			return
		}
		r.spilling.Store(true)
	}
	if r.spillInBytes.Add(size) > spillQueueBytes && len(r.spillIn) > 0 {
		r.spillInBytes.Add(-size)
		r.drop("capture queue full and spill writer behind")
		return
	}
	select {
	case r.spillIn <- ex:
		r.spillPending++
		r.accepted.Add(1)
	default:
		r.spillInBytes.Add(-size)
		r.drop("capture queue full and spill writer behind")
	}
}

func exchangeSize(ex *proxy.Exchange) int64 { return int64(len(ex.Request) + len(ex.Response) + 512) }

// tryQueue puts ex on the queue if it has room.
func (r *Recorder) tryQueue(ex *proxy.Exchange, size int64) bool {
	v := r.c.queuedBytes.Add(size)
	if v > r.opts.MaxQueueBytes && r.c.queued.Load() > 0 {
		r.c.queuedBytes.Add(-size)
		return false
	}
	if !r.enqueue(ex, size) {
		r.c.queuedBytes.Add(-size)
		return false
	}
	r.c.notePeak(v)
	r.c.queued.Add(1)
	return true
}

// enqueue numbers ex and puts it on the queue, unless it is full.
func (r *Recorder) enqueue(ex *proxy.Exchange, size int64) bool {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if len(r.pending) >= maxQueueItems {
		return false
	}
	r.pending = append(r.pending, queued{ex: ex, size: size, arrival: r.next})
	r.next++
	switch len(r.pending) {
	case 1:
		signal(r.kick)
	case handOffBatch:
		signal(r.full)
	}
	return true
}

// signal sends on a channel of capacity one unless a signal is waiting.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// dispatch hands what Hook queued to the workers, handOffLinger (or
// commitLinger) after the first exchange of a batch or once handOffBatch
// are waiting, until the Recorder closes; then it hands over the rest and
// closes work.
func (r *Recorder) dispatch() {
	defer close(r.work)
	linger := time.NewTimer(handOffLinger)
	linger.Stop()
	for stopping := false; !stopping; {
		chunk := handOffChunk
		select {
		case <-r.kick:
			d := commitLinger
			if r.outbox.Journaling() {
				d = r.handOff
			}
			linger.Reset(d)
			select {
			case <-linger.C:
				// A trickle: one worker builds it, leaving the other
				// processors to the relay.
				chunk = handOffBatch
			case <-r.full:
			case <-r.stopDispatch:
				stopping = true
			}
			linger.Stop()
		case <-r.stopDispatch:
			stopping = true
		}
		r.qmu.Lock()
		batch := r.pending
		r.pending = nil
		select { // a full signal for the batch just taken
		case <-r.full:
		default:
		}
		r.qmu.Unlock()
		for len(batch) > 0 {
			n := min(len(batch), chunk)
			r.work <- batch[:n:n]
			batch = batch[n:]
		}
	}
}

// drop counts an exchange lost because capture's queue was full (or
// capture closing) and logs at most once every ten seconds.
func (r *Recorder) drop(why string) { r.dropFor(losses.QueueFull, why, 1) }

// dropFor is drop for n exchanges, with the reason recorded in the loss
// ledger.
func (r *Recorder) dropFor(reason, why string, n int64) {
	r.c.lose(reason, n, why)
	total := r.c.dropped.Load()
	r.dropMu.Lock()
	defer r.dropMu.Unlock()
	if time.Since(r.lastDrop) > 10*time.Second {
		r.lastDrop = time.Now()
		r.log.Warn("exchange not recorded", "reason", why, "dropped_total", total,
			"queued", r.c.queued.Load(), "queued_bytes", r.c.queuedBytes.Load())
	}
}

// worker builds the steps of each chunk it is handed, then passes them to
// the committer together.
func (r *Recorder) worker() {
	var steps []*hindsight.Step
	for chunk := range r.work {
		steps = steps[:0]
		for _, q := range chunk {
			steps = append(steps, r.build(q.ex))
		}
		r.rmu.Lock()
		for i, q := range chunk {
			r.results[q.arrival] = built{step: steps[i], size: q.size}
		}
		r.ready.Broadcast()
		r.rmu.Unlock()
		clear(steps)
	}
}

// build redacts and builds one step; a panic loses only that step.
func (r *Recorder) build(ex *proxy.Exchange) (s *hindsight.Step) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("building a step panicked; step not recorded", "method", ex.Method, "panic", fmt.Sprint(p))
			s = nil
		}
	}()
	st := BuildStep(ex, r.red, r.opts.MaxBodyBytes)
	st.Namespace = r.opts.Namespace
	return &st
}

// commit takes built steps in arrival order, tags them and appends them to
// the outbox in batches.
func (r *Recorder) commit() {
	defer close(r.done)
	for {
		r.rmu.Lock()
		for !r.readyAt(r.committed) && !(r.allIn && r.committed >= r.dispatched) {
			r.ready.Wait()
		}
		if r.allIn && r.committed >= r.dispatched {
			r.rmu.Unlock()
			return
		}
		batch := r.batch[:0]
		lost := 0
		var size int64
		for len(batch) < commitBatch {
			b, ok := r.results[r.committed]
			if !ok {
				break
			}
			delete(r.results, r.committed)
			r.committed++
			size += b.size
			if b.step == nil {
				lost++
				continue
			}
			batch = append(batch, *b.step)
		}
		r.rmu.Unlock()

		for i := range batch {
			r.tagger.Tag(&batch[i])
			r.calls.observe(&batch[i])
			r.c.redactions.Add(int64(batch[i].Redactions))
			if len(batch[i].Truncated) > 0 {
				r.c.truncated.Add(1)
				r.c.ledger.Add(losses.Truncated, 1, "a body over the size limit was cut")
			}
		}
		// Back-pressure: while the daemon is behind, the batch waits here
		// and the queue behind it fills (and spills), bounded.
		r.outbox.WaitRoom()
		r.outbox.Append(batch)
		r.batch = batch
		r.c.captured.Add(int64(len(batch)))
		r.c.queued.Add(-int64(len(batch) + lost))
		r.c.queuedBytes.Add(-size)
		r.c.lose(losses.Encode, int64(lost), "building the step panicked")
		r.processed.Add(int64(len(batch) + lost))
		now := time.Now()
		for i := range batch {
			if !batch[i].EndedAt.IsZero() {
				r.commitDelay.Observe(now.Sub(batch[i].EndedAt).Seconds())
			}
		}
		clear(batch) // the outbox keeps the encodings; let the bodies go
		r.rmu.Lock()
		close(r.progress)
		r.progress = make(chan struct{})
		r.rmu.Unlock()
		if len(batch)+lost < commitBatch {
			time.Sleep(commitLinger)
		}
	}
}

// readyAt reports whether arrival a was built (or failed).
func (r *Recorder) readyAt(a uint64) bool {
	_, ok := r.results[a]
	return ok
}

// Sync waits until every exchange queued (or spilled) before it has been
// handed to the outbox, or ctx is done; it hands the queue to the workers
// at once rather than after the linger. With no Deliverer, or while the
// daemon is unreachable, the outbox has written them to its database by
// then; otherwise to its journal (or, when that cannot be written, they are
// acknowledged or in the database within the spool's PersistAfter).
func (r *Recorder) Sync(ctx context.Context) error {
	target := r.accepted.Load()
	r.qmu.Lock()
	if len(r.pending) > 0 {
		signal(r.full) // no linger: hand the queue over now
	}
	r.qmu.Unlock()
	for {
		r.rmu.Lock()
		progress := r.progress
		r.rmu.Unlock()
		if r.processed.Load() >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sync capture: %w", ctx.Err())
		case <-r.done:
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
	close(r.spillIn)
	r.mu.Unlock()
	var err error
	// The spill is read back into the queue before it closes.
	select {
	case <-r.unspillDone:
	case <-ctx.Done():
		close(r.unspillStop)
		<-r.unspillDone
	}
	close(r.stopDispatch)
	select {
	case <-r.done:
	case <-ctx.Done():
		err = fmt.Errorf("close recorder: %d exchanges not recorded: %w", r.c.queued.Load(), ctx.Err())
		r.log.Error("capture closed before its queue was recorded", "queued", r.c.queued.Load())
		// The pipeline keeps running into the outbox below until it is
		// closed; what it has not reached is lost.
	}
	if e := r.outbox.Close(ctx); e != nil && err == nil {
		err = e
	}
	close(r.ledgerStop)
	<-r.ledgerDone
	if e := r.c.ledger.Close(true); e != nil {
		r.log.Warn("record lost steps", "err", e)
	}
	for _, c := range r.colls {
		r.opts.Registerer.Unregister(c)
	}
	return err
}

// spillWriter seals the exchanges Hook sends to the spill and appends
// them, writing what it gathered once it has caught up with Hook (or
// gathered spillFlushBytes): one write for a burst.
func (r *Recorder) spillWriter() {
	defer close(r.writerDone)
	for ex := range r.spillIn {
		r.spillInBytes.Add(-exchangeSize(ex))
		r.spOnce.Do(func() {
			var sp *spill
			sp, r.spErr = openSpill(r.outbox.SpillDir(), r.opts.MaxSpillBytes, r.spillMore, r.log, r.c)
			r.sp.Store(sp)
		})
		sp := r.sp.Load()
		if r.spErr != nil {
			r.spillFailed(1, r.spErr)
			continue
		}
		written, lost, err := sp.put(ex)
		r.spilled(written, lost, err)
		if len(r.spillIn) == 0 || sp.buffered() >= spillFlushBytes {
			r.spilled(sp.flush())
		}
	}
}

// spilled counts what a put or flush of the spill wrote, and what it lost.
func (r *Recorder) spilled(written, lost int, err error) {
	if written > 0 {
		r.noteSpilled(written)
	}
	if err != nil {
		r.spillFailed(lost, err)
	}
}

// spillFailed counts n exchanges lost on their way to the spill.
func (r *Recorder) spillFailed(n int, err error) {
	reason := losses.QueueFull
	if diskspace.IsNoSpace(err) {
		reason = losses.DiskFull
	}
	r.dropFor(reason, "capture queue full; cannot spill: "+err.Error(), int64(n))
	r.processed.Add(int64(n))
	r.spillGone(int64(n))
}

// noteSpilled counts n exchanges written to the spill and says so in the
// log at most every ten seconds.
func (r *Recorder) noteSpilled(n int) {
	total := r.c.spilledEx.Add(int64(n))
	r.spillLogMu.Lock()
	defer r.spillLogMu.Unlock()
	if time.Since(r.lastSpillLog) > 10*time.Second {
		r.lastSpillLog = time.Now()
		r.log.Warn("capture is behind: exchanges spill to disk, sealed with a key held only in memory, and are recorded as capture catches up",
			"spilled_total", total, "unspilled_total", r.c.unspilledEx.Load(), "spill_bytes", r.c.spillBytes.Load())
	}
}

// spillGone ends n exchanges' time on the spill path: queued or lost.
func (r *Recorder) spillGone(n int64) {
	r.spillMu.Lock()
	r.spillPending -= n
	if r.spillPending == 0 {
		r.spilling.Store(false)
	}
	r.spillMu.Unlock()
}

// unspill reads spilled exchanges back, in order, and queues them as the
// queue has room, until the spill writer is done and the spill empty.
func (r *Recorder) unspill() {
	defer close(r.unspillDone)
	defer func() {
		if sp := r.sp.Load(); sp != nil {
			if n := sp.close(); n > 0 {
				r.c.lose(losses.AtExit, int64(n), "capture closed before its spill was recorded")
				r.processed.Add(int64(n))
				r.log.Error("capture closed before its spill was recorded; exchanges lost", "exchanges", n)
			}
		}
	}()
	writerDone := r.writerDone
	for {
		var ex *proxy.Exchange
		var ok bool
		var err error
		sp := r.sp.Load()
		if sp != nil {
			ex, ok, err = sp.next()
		}
		if !ok {
			if writerDone == nil && (sp == nil || sp.pending() == 0) {
				return
			}
			select {
			case <-r.spillMore:
			case <-writerDone:
				writerDone = nil // it wrote its last; see what is left
			case <-r.unspillStop:
				<-r.writerDone
				return
			}
			continue
		}
		if err != nil {
			r.c.spillLost.Add(1)
			r.c.lose(losses.QueueFull, 1, "spilled exchange unreadable: "+err.Error())
			r.processed.Add(1)
			r.log.Error("spilled exchange unreadable; lost", "err", err)
			r.spillGone(1)
			continue
		}
		if !r.requeue(ex) {
			r.c.lose(losses.AtExit, 1, "capture closed before its spill was recorded")
			r.processed.Add(1)
			r.spillGone(1)
			<-r.writerDone
			return
		}
		r.c.unspilledEx.Add(1)
		r.spillGone(1)
	}
}

// requeue puts a spilled exchange on the queue once it has room; false
// when the Recorder is closing and gave up waiting.
func (r *Recorder) requeue(ex *proxy.Exchange) bool {
	size := exchangeSize(ex)
	for {
		r.rmu.Lock()
		progress := r.progress
		r.rmu.Unlock()
		if n := r.c.queued.Load(); n == 0 || r.c.queuedBytes.Load()+size <= r.opts.MaxQueueBytes && n < maxQueueItems/2 {
			break
		}
		select {
		case <-progress:
		case <-r.unspillStop:
			return false
		}
	}
	r.c.notePeak(r.c.queuedBytes.Add(size))
	r.c.queued.Add(1)
	for !r.enqueue(ex, size) {
		// Only Hook races for the room waited for above, and it
		// spills while the spill is read back: this is brief.
		time.Sleep(time.Millisecond)
	}
	return true
}
