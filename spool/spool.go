package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/defaults"
	"github.com/hindsight-proxy/hindsight/internal/losses"
)

// Defaults of Options.
const (
	DefaultRetention    = 7 * 24 * time.Hour
	DefaultBatchSize    = 256
	DefaultMaxHeld      = 10000
	DefaultSyncInterval = 20 * time.Millisecond
	DefaultDrainTimeout = 10 * time.Second // Close's final drain when ctx has no deadline
	// DefaultMaxMemBytes bounds the stored steps also kept in memory
	// (their encoded size) to be delivered without reading Badger back.
	DefaultMaxMemBytes = 2 << 20

	// DefaultPersistAfter is how long after its exchange ended a step the
	// journal does not hold may wait in memory for the daemon's
	// acknowledgement before it is written to disk. It leaves a write 20
	// ms (the database, when not open yet, is opened openLead before), so
	// a step relayed more than 50 ms before a SIGKILL is acknowledged or
	// on disk.
	DefaultPersistAfter = 30 * time.Millisecond

	// DefaultJournalPersistAfter replaces PersistAfter for the steps the
	// spool's journal holds (see journal): they are safe from a killed
	// process already, and go to the database only when the daemon has
	// not taken them this long after they were journaled.
	DefaultJournalPersistAfter = 5 * time.Second
)

// Options configure a Spool.
type Options struct {
	Home      hindsight.Home
	Deliverer Deliverer     // nil: steps stay on disk for the next sidecar or the daemon
	Logger    *slog.Logger  // nil: slog.Default()
	Retention time.Duration // undelivered steps are kept this long; 0: DefaultRetention
	BatchSize int           // steps per delivery; 0: DefaultBatchSize
	MaxHeld   int           // steps kept in memory while the disk fails; 0: DefaultMaxHeld
	// MaxHeldBytes bounds the size of those steps; 0: DefaultMaxHeldBytes.
	MaxHeldBytes int
	// DiskReserve is the free space the outbox keeps on its filesystem:
	// below it, it writes nothing to disk (see checkSpace). 0: the
	// default (32 MiB, at most a quarter of the filesystem); negative: no
	// check.
	DiskReserve int64
	// SyncInterval is how long after a write the database is fsynced
	// (a write is already safe from a killed process once it returns; the
	// sync guards against a machine crash). 0: DefaultSyncInterval.
	SyncInterval time.Duration
	// MaxMemBytes bounds the undelivered steps kept in memory, from which
	// they are delivered; older undelivered steps are written to disk and
	// read back from there (journaled steps may pass it by a quarter
	// while the daemon answers: see memLimit). 0: DefaultMaxMemBytes.
	MaxMemBytes int
	// PersistAfter is how long after its exchange ended (Step.EndedAt) an
	// undelivered step is written to disk; 0: DefaultPersistAfter. With no
	// Deliverer, or while the daemon is unreachable, steps are written at
	// once.
	PersistAfter time.Duration
	// JournalPersistAfter is PersistAfter for the steps the journal holds;
	// 0: DefaultJournalPersistAfter.
	JournalPersistAfter time.Duration
}

// A Spool is one sidecar's outbox: a directory under Home.Outboxes()/<id>/,
// locked by the sidecar that owns it. Append numbers steps by a gap-free
// sequence (their Seq; their Source is the outbox id), and a background
// loop delivers them in that order, with capped exponential backoff, from
// memory first and from the database for what had to be written (see the
// package doc for when). Delivered steps are removed; a clean Close
// removes the whole directory. When the disk cannot be written, steps are
// held in memory up to MaxHeld and delivered from there; nothing blocks
// the caller.
type Spool struct {
	id   string
	dir  string
	opts Options
	log  *slog.Logger
	c    *counters
	lock *os.File // held while the spool is open (see lockFile)
	led  *ledger  // nil when it could not be created (logged)

	queue     // the steps in memory, and which of them are on disk
	store     // the database, opened when a step must first reach disk
	writer    // the journal, and the order of changes to what is on disk
	loops     // the signals between the spool's goroutines
	retention // the retention pass's state
}

// loops holds what the delivery, persist and sync goroutines wait on, and
// what Close uses to stop them.
type loops struct {
	cancel    context.CancelFunc
	notify    chan struct{} // deliverLoop: a step was appended
	draining  chan struct{} // closed by Close: deliver what is left, then stop
	loopDone  chan struct{} // deliverLoop returned
	syncDone  chan struct{} // syncLoop returned
	stopSync  chan struct{} // closed by Close: stop syncLoop and persistLoop
	closeOnce sync.Once
}

// Open creates a new spool for this process under opts.Home and starts
// its delivery loop. It fails only when the outbox directory cannot be
// created or locked; a database that cannot be opened leaves the spool in
// memory mode (logged, counted in Counts.WriteErrors).
func Open(opts Options) (*Spool, error) {
	return open(opts, &counters{})
}

func open(opts Options, c *counters) (*Spool, error) {
	if opts.Home == "" {
		return nil, errors.New("open outbox: no home directory")
	}
	opts = opts.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	id := newID()
	dir, lock, err := create(opts.Home, id)
	if err != nil {
		return nil, err
	}
	o := &Spool{id: id, dir: dir, opts: opts, log: log.With("outbox", id), c: c, lock: lock}
	o.next = 1
	o.opened = time.Now()
	o.loops = loops{notify: make(chan struct{}, 1), draining: make(chan struct{}), loopDone: make(chan struct{}),
		syncDone: make(chan struct{}), stopSync: make(chan struct{})}
	o.wake, o.persistDone, o.syncWake = make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1)
	o.initStore()
	o.jr.dir = dir
	o.journalOn.Store(true)
	if o.led, err = openLedger(dir); err != nil {
		o.log.Error("outbox ledger not created: exchanges left to capture's queue are not counted if this sidecar is killed", "err", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	go o.deliverLoop(ctx)
	go o.syncLoop()
	go o.persistLoop()
	return o, nil
}

// withDefaults returns opts with every zero bound replaced by its default.
func (opts Options) withDefaults() Options {
	opts.Retention = defaults.Positive(opts.Retention, DefaultRetention)
	opts.BatchSize = defaults.Positive(opts.BatchSize, DefaultBatchSize)
	opts.MaxHeld = defaults.Positive(opts.MaxHeld, DefaultMaxHeld)
	opts.MaxHeldBytes = defaults.Positive(opts.MaxHeldBytes, DefaultMaxHeldBytes)
	opts.SyncInterval = defaults.Positive(opts.SyncInterval, DefaultSyncInterval)
	opts.MaxMemBytes = defaults.Positive(opts.MaxMemBytes, DefaultMaxMemBytes)
	opts.PersistAfter = defaults.Positive(opts.PersistAfter, DefaultPersistAfter)
	opts.JournalPersistAfter = defaults.Positive(opts.JournalPersistAfter, DefaultJournalPersistAfter)
	return opts
}

// SpillDir is the directory inside the spool's outbox where the Recorder
// keeps the exchanges it spills (see DrainOptions.DeadSpill).
func (o *Spool) SpillDir() string { return filepath.Join(o.dir, spillName) }

// RecordLosses makes the spool record the steps it loses in l as well as
// in its counters (see internal/losses).
func (o *Spool) RecordLosses(l *losses.Ledger) { o.c.losses.SetLedger(l) }

// ID is the outbox id, the Source of its steps.
func (o *Spool) ID() string { return o.id }

// Dir is the outbox directory.
func (o *Spool) Dir() string { return o.dir }

// Close stops the outbox: it delivers what is left until ctx is done, then
// closes the database. An emptied outbox is removed; one with undelivered
// steps stays for the next sidecar or the daemon (DrainOrphans). Steps
// still held in memory are lost, and counted in Counts.Dropped.
//
// A ctx without a deadline gets DefaultDrainTimeout, so a daemon that is
// down cannot hold a closing sidecar for ever.
func (o *Spool) Close(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDrainTimeout)
		defer cancel()
	}
	var err error
	o.closeOnce.Do(func() {
		close(o.draining)
		select {
		case <-o.loopDone:
		case <-ctx.Done():
			o.cancel()
			<-o.loopDone
		}
		o.cancel()
		close(o.stopSync)
		<-o.syncDone
		if o.persistDone != nil {
			<-o.persistDone
		}
		err = o.shutdown()
	})
	return err
}

func (o *Spool) shutdown() error {
	o.wmu.Lock()
	o.persist(time.Now(), true)
	o.mu.Lock()
	o.closed = true
	o.freed()
	// Steps the database did not take are lost, unless the journal has
	// them: then it stays, for the next sidecar or the daemon. (A step
	// the journal did not take, the disk being short of space, is lost.)
	n, kept := 0, false
	for _, e := range o.mem[o.memDisk:] {
		if e.journaled {
			kept = true
		} else {
			n++
		}
	}
	if n > 0 {
		reason := losses.AtExit
		if o.spaceLow.Load() {
			reason = losses.DiskFull
		}
		o.c.losses.Lose(reason, int64(n), "the outbox closed with the steps only in memory")
		o.c.depth.Add(-int64(n))
		o.log.Error("outbox closed with steps only in memory; they are lost", "steps", n)
	}
	// Every step is kept, delivered or counted lost by now.
	o.led.close()
	o.mu.Unlock()
	o.jr.close(!kept)
	o.wmu.Unlock()
	empty := !kept
	var err error
	if db := o.db.Load(); db != nil {
		empty = empty && countKeys(db, prefixStep) == 0
		if empty {
			if e := o.exportRejected(); e != nil {
				empty, err = false, e
			}
		}
		if e := db.Sync(); e != nil {
			err = fmt.Errorf("sync outbox: %w", e)
		}
		if e := o.checkSpace(0); e != nil {
			// Closing flushes the memtable through a mapped file: leave
			// the database to the process's exit, its log replays at the
			// next open.
			o.log.Warn("disk short of space: the outbox database is left unclosed; its log is replayed when it is opened again", "err", e)
			empty = false
		} else if e := db.Close(); e != nil && err == nil {
			err = fmt.Errorf("close outbox: %w", e)
		}
	}
	if empty && hasEnds(o.dir) {
		// Ends the daemon was not told: the outbox stays for its
		// drainer, which tells it.
		o.log.Warn("outbox closed with session ends the daemon was not told; the next sidecar or the daemon will tell it", "dir", o.dir)
	} else if empty {
		if e := os.RemoveAll(o.dir); e != nil && err == nil {
			err = fmt.Errorf("remove outbox: %w", e)
		}
	} else {
		o.log.Warn("outbox closed with undelivered steps; the next sidecar or the daemon will deliver them", "depth", o.c.depth.Load(), "dir", o.dir)
	}
	o.lock.Close()
	return err
}
