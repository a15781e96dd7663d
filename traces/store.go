package traces

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
)

// Options configure a Store.
type Options struct {
	IdleGap time.Duration         // 0: DefaultIdleGap
	Logger  *slog.Logger          // nil: slog.Default()
	Now     func() time.Time      // nil: time.Now (tests set a clock)
	Badger  func(*badger.Options) // adjusts Badger's options; may be nil
	// SyncInterval is how often written steps are synced to disk; 0:
	// DefaultSyncInterval. See Store.
	SyncInterval time.Duration
}

// DefaultSyncInterval is how often the trace store syncs what it wrote.
const DefaultSyncInterval = 200 * time.Millisecond

// Store keeps steps in Badger and segments them into tasks.
//
// Steps are known by Source and Seq, so a batch delivered twice is stored
// once. A step is stored as it was delivered (ingest reads its JSON once,
// in one pass, for what it needs), and a batch costs one transaction.
// Segmentation puts a step into a task by, in this order: the explicit task
// id; the agent host process of a stdio sidecar; the session id. A new task
// starts after an idle gap. Step indices are assigned in arrival order and
// never change, so reflection can cite them.
//
// A batch is acknowledged once written, before it is synced: a write is in
// the kernel's page cache when Ingest returns, so it survives the daemon's
// crash or SIGKILL, and a loop syncs every SyncInterval (200 ms), so a
// machine crash (not a process's) loses at most the steps of that long.
// Two fsyncs per batch cost the daemon more CPU than the rest of ingest
// with an agent's small batches, and they lengthened its acknowledgements
// past the outbox's deadline, so that sidecars wrote steps to disk anyway.
type Store struct {
	db      *badger.DB
	compact *badgerdb.Compactor
	trim    *trimmer
	dirty   dirtyFlag     // written since the last sync
	stop    chan struct{} // closed by Close: the sync loop ends
	synced  chan struct{} // closed when the sync loop has ended
	dir     string
	logger  *slog.Logger
	gap     time.Duration
	now     func() time.Time
	started time.Time

	mu sync.Mutex // serializes writes: segmentation reads what it writes
	// hw caches the committed hw/SOURCE keys (t.mu held), loaded on first
	// use of a source: a step above its source's high-water mark was never
	// seen, so the common in-order step needs no dedupe lookup. Its
	// entries change through their pointers (see ingestTxn.commit).
	hw map[string]*highWater
	// latest caches, by segmentation group, the committed record of the
	// group's latest task (t.mu held), so that a batch continuing it
	// needs no index lookup nor decoding. Writes to task records other
	// than ingest's empty it.
	latest map[string]*taskRec
	// closes caches the committed closed/SESSION records (t.mu held),
	// found or not, by session id: a session's steps above its source's
	// high-water mark look for a close that waits for them, once a batch.
	// Ingest and CloseSession, which write them, keep it current.
	closes map[string]closeState
	// scratch is the last ingest transaction (t.mu held), whose maps the
	// next one reuses (see newIngestTxn).
	scratch *ingestTxn
}

// maxCachedCloses bounds Store.closes (a session is an agent's run
// of a server: a long-lived daemon sees many).
const maxCachedCloses = 4096

// cacheClose records the committed close record of session id; t.mu is
// held.
func (t *Store) cacheClose(id string, c closeState) {
	if _, ok := t.closes[id]; !ok && len(t.closes) >= maxCachedCloses {
		clear(t.closes)
	}
	c.dirty = false
	// Not a view of a request's body: assigning an entry stores its key
	// anew, even when the entry was there.
	t.closes[strings.Clone(id)] = c
}

// highWater is a source's highest ingested Seq; ok is false for a source
// never seen. When runOK, the stored run of consecutive seqs that ends at
// seq starts at run: the next seq extends it.
type highWater struct {
	seq   uint64
	ok    bool
	run   uint64
	runOK bool
}

// seqRun is a run of consecutive seqs of one source, all ingested.
type seqRun struct{ first, last uint64 }

// Open opens (creating) the trace store in dir.
func Open(dir string, opt Options) (*Store, error) {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.IdleGap <= 0 {
		opt.IdleGap = DefaultIdleGap
	}
	bo := traceBadgerOptions(dir, opt.Logger)
	if opt.Badger != nil {
		opt.Badger(&bo)
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("open trace store: %w", err)
	}
	if opt.SyncInterval <= 0 {
		opt.SyncInterval = DefaultSyncInterval
	}
	t := &Store{db: db, dir: dir, logger: opt.Logger, gap: opt.IdleGap, now: opt.Now, started: opt.Now(),
		hw: map[string]*highWater{}, latest: map[string]*taskRec{}, closes: map[string]closeState{}, stop: make(chan struct{}), synced: make(chan struct{})}
	t.dirty.kick = make(chan struct{}, 1)
	t.compact = badgerdb.StartCompactor(db, opt.Logger)
	t.trim = startTrimmer(dir, opt.Logger)
	go t.syncLoop(opt.SyncInterval)
	return t, nil
}

// syncLoop syncs the database interval after it was written, until
// Close. It sleeps while nothing is written: an idle daemon does not wake
// for it.
func (t *Store) syncLoop(interval time.Duration) {
	defer close(t.synced)
	timer := time.NewTimer(interval)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-t.dirty.kick:
		}
		t.trim.touched()
		timer.Reset(interval)
		select {
		case <-t.stop:
			return // Close syncs
		case <-timer.C:
		}
		if t.dirty.Swap(false) {
			if err := t.db.Sync(); err != nil {
				t.dirty.Store(true) // tried again interval later
				t.logger.Error("sync trace store", "err", err)
			}
		}
	}
}

// dirtyFlag says the trace store was written since its last sync; setting
// it wakes the sync loop.
type dirtyFlag struct {
	b    atomic.Bool
	kick chan struct{} // capacity 1
}

// Store sets the flag; true wakes the sync loop.
func (d *dirtyFlag) Store(v bool) {
	d.b.Store(v)
	if v {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// Load returns the flag.
func (d *dirtyFlag) Load() bool { return d.b.Load() }

// Swap sets the flag and returns what it was.
func (d *dirtyFlag) Swap(v bool) bool { return d.b.Swap(v) }

// MarkWritten tells the store that a component sharing its database (see
// DB) wrote to it: the write is synced with the store's next sync.
func (t *Store) MarkWritten() { t.dirty.Store(true) }

// traceBadgerOptions are the daemon's Badger settings with what suits a
// trace store: a step's JSON (most are over a KiB) goes to the value log,
// written once, and the LSM tree holds its pointer, so memtable flushes and
// compactions do not copy step bodies again and again. Steps are never
// rewritten; task records, which are, stay under the threshold (they are a
// few hundred bytes), so the value log holds next to no garbage. Writes
// are serialized by the store's mutex, so Badger need not track conflicts.
func traceBadgerOptions(dir string, logger *slog.Logger) badger.Options {
	return badgerdb.Options(dir, logger).
		WithSyncWrites(false). // synced by syncLoop (see Store)
		WithValueThreshold(traceValueThreshold).
		WithValueLogMaxEntries(traceValueLogMaxEntries).
		WithDetectConflicts(false)
}

// traceValueLogMaxEntries bounds the entries of a value-log file: a purge
// fills the file being appended to so that Badger opens another and the
// old one can be collected (erase.RotateValueLog), which costs up to this
// many entries of traceValueThreshold bytes (8 MiB) rather than the file's
// 64 MiB.
const traceValueLogMaxEntries = 8 << 10

// traceValueThreshold is the size from which a trace store's value goes to
// the value log.
const traceValueThreshold = 1 << 10

// Close stops the sync loop and the compactor and closes the store, which
// syncs it.
func (t *Store) Close() error {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.synced
	t.compact.Stop()
	t.trim.close()
	return t.db.Close()
}

// DB returns the underlying Badger database, for components of the daemon
// that keep their own prefixed keys in it (they must not use the prefixes
// listed in records.go).
func (t *Store) DB() *badger.DB { return t.db }

// IdleGap returns the idle gap that splits tasks.
func (t *Store) IdleGap() time.Duration { return t.gap }

// write runs fn in a read-write transaction and marks the store for the
// next sync.
func (t *Store) write(fn func(txn *badger.Txn) error) error {
	err := t.db.Update(fn)
	t.dirty.Store(true)
	return err
}
