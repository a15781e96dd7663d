package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
)

// store is the spool's Badger database: opened when a step must first
// reach disk (see disk), synced after writes (syncLoop), closed when idle
// (closeIdleDisk), and kept from filling the disk (checkSpace). While the
// daemon keeps up, a sidecar runs no database at all, and its compactors
// and syncs do not wake it.
type store struct {
	dir  string       // the outbox directory; the database is dir/db
	log  *slog.Logger // the spool's
	c    *counters    // the spool's
	opts *Options     // the spool's: MaxHeld, MaxHeldBytes

	// diskReserve is Options.DiskReserve (a test changes it while the
	// outbox runs).
	diskReserve atomic.Int64

	db         atomic.Pointer[badger.DB] // nil until opened, and while it cannot be opened
	syncWake   chan struct{}             // syncLoop: steps were written
	dbMu       sync.Mutex                // one open or close of db at a time
	movedAside bool                      // a database that did not open was moved aside (once); dbMu
	openFailed time.Time                 // when db last failed to open; dbMu
	openErr    error                     // why; dbMu
	spaceLow   atomic.Bool               // the last space check failed (see checkSpace)
	allocSince atomic.Int64              // bytes checked since the database's logs were last allocated ahead
	alloc      diskspace.Allocator       // remembers how far the logs were found allocated

	fit        sync.Once // fitFS: the filesystem's size read
	fitReserve int64     // the default reserve, fitted to the filesystem
	fitAhead   int64     // allocateAhead, fitted to the filesystem
}

// initStore points the store at the spool's directory, log, counters and
// options.
func (o *Spool) initStore() {
	o.store.dir, o.store.log, o.store.c, o.store.opts = o.dir, o.log, o.c, &o.opts
	o.store.diskReserve.Store(o.opts.DiskReserve)
}

// disk returns the outbox's database, opening it the first time a step
// must be written. A database that does not open is moved aside (kept for
// inspection) and a fresh one tried once; when that fails too the error is
// returned, the steps stay in memory (see persist), and a write openRetry
// later tries again (without moving anything aside again).
func (s *store) disk() (*badger.DB, error) {
	if db := s.db.Load(); db != nil {
		return db, nil
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if db := s.db.Load(); db != nil {
		return db, nil
	}
	if time.Since(s.openFailed) < openRetry {
		return nil, s.openErr // a failing disk is not tried at every write
	}
	// Opening writes the memtable log's header through a mapped file.
	if err := diskspace.Check(s.dir, s.reserve(), 0); err != nil {
		s.noteLow(err)
		return nil, fmt.Errorf("open outbox database: %w", err)
	}
	path := filepath.Join(s.dir, dbName)
	db, err := openDBContained(path, s.log)
	if err != nil {
		if _, serr := os.Stat(path); serr == nil && !s.movedAside && !diskspace.IsNoSpace(err) {
			s.movedAside = true
			s.c.corrupt.Add(1)
			aside := path + asideMark + strconv.FormatInt(time.Now().UnixNano(), 10)
			s.log.Error("cannot open outbox database; moved aside, starting a fresh one", "err", err, "to", aside)
			_ = os.Rename(path, aside)
			db, err = openDBContained(path, s.log)
		}
		if err != nil {
			s.openFailed, s.openErr = time.Now(), fmt.Errorf("open outbox database: %w", err)
			return nil, s.openErr
		}
	}
	s.db.Store(db)
	s.allocSince.Store(allocateAhead) // allocate its new logs at the next check (fitAhead ≤ allocateAhead)
	return db, nil
}

// openDBContained opens a database with memory faults contained (see
// diskspace.Contain): a mapped write the filesystem cannot back fails the
// open instead of killing the process.
func openDBContained(path string, log *slog.Logger) (db *badger.DB, err error) {
	err = diskspace.Contain("open outbox database", func() error {
		db, err = openDB(path, log)
		return err
	})
	return db, err
}

// openRetry spaces the attempts to open a database that failed to open.
const openRetry = time.Second

// idleDisk is how long an outbox's database stays open after its last
// write once nothing is left in it.
const idleDisk = time.Minute

// closeIdleDisk closes the database and removes it when it holds nothing
// (every step written was delivered, no refused step is kept) and nothing
// was written for idleDisk: a sidecar whose daemon answered late once goes
// back to running no database. disk opens a fresh one when needed.
func (o *Spool) closeIdleDisk(now time.Time) {
	o.wmu.Lock()
	defer o.wmu.Unlock()
	o.dbMu.Lock()
	defer o.dbMu.Unlock()
	db := o.db.Load()
	if db == nil {
		return
	}
	o.mu.Lock()
	busy := o.closed || o.memDisk > 0 || o.diskOnly > 0 || o.keptRejected || now.Sub(o.lastWrite) < idleDisk
	o.mu.Unlock()
	// Closing flushes the memtable to a table, through a mapped file.
	if busy || countKeys(db, prefixStep) > 0 || o.checkSpace(0) != nil {
		return
	}
	o.db.Store(nil)
	if err := db.Close(); err != nil {
		o.log.Warn("close idle outbox database", "err", err)
	}
	if err := os.RemoveAll(filepath.Join(o.dir, dbName)); err != nil {
		o.log.Warn("remove idle outbox database", "err", err)
	}
}

// openDB opens an outbox database; a variable so tests can make the disk
// fail.
var openDB = openBadger

func openBadger(dir string, log *slog.Logger) (*badger.DB, error) {
	opts := badger.DefaultOptions(dir).
		WithLogger(badgerdb.NewLogger(log)).
		WithLoggingLevel(badger.WARNING).
		WithSyncWrites(false).
		// Smaller memtables and tables than Badger's defaults: steps are
		// written and removed within milliseconds, so what Badger holds is
		// mostly tombstones, and its buffers (a memtable arena, two while
		// one is flushed, and the table builders' allocators that a flush
		// or compaction takes from a pool of up to eight) scale with these
		// sizes. They are part of a sidecar's live heap while a backlog is
		// written, under its soft memory limit (capture.MemoryBudget).
		//
		// Steps stay in the LSM tree (a high value threshold): a write to
		// the memtable's WAL survives a SIGKILL once it returns, a write
		// to the value log does not (TestSIGKILLLosesNothingRelayed fails
		// with the values there), although it would cost less than half
		// the CPU per step written and removed.
		WithMemTableSize(2 << 20).
		WithNumMemtables(2).
		WithValueLogFileSize(16 << 20).
		WithValueThreshold(256 << 10).
		WithBaseTableSize(1 << 20).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithNumCompactors(2).
		WithBlockCacheSize(0).
		WithCompression(0).
		WithDetectConflicts(false).
		WithCompactL0OnClose(false)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open badger %s: %w", dir, err)
	}
	return db, nil
}

// write stores entries in as few transactions as Badger allows.
func (s *store) write(entries []entry) error {
	var need int64
	for _, e := range entries {
		need += int64(len(e.raw)) + 32
	}
	if err := s.checkSpace(need); err != nil {
		return fmt.Errorf("write outbox: %w", err)
	}
	db, err := s.disk()
	if err != nil {
		return err
	}
	txn := db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, e := range entries {
		k := stepKey(prefixStep, e.seq)
		if err := txn.Set(k, e.raw); errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return fmt.Errorf("commit outbox: %w", err)
			}
			txn = db.NewTransaction(true)
			if err := txn.Set(k, e.raw); err != nil {
				return fmt.Errorf("write outbox: %w", err)
			}
		} else if err != nil {
			return fmt.Errorf("write outbox: %w", err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("commit outbox: %w", err)
	}
	return nil
}

// syncLoop fsyncs the database SyncInterval after steps are written; the
// steps written meanwhile share the sync. It sleeps while nothing is
// written, and shutdown syncs what is left.
func (o *Spool) syncLoop() {
	defer close(o.syncDone)
	for {
		select {
		case <-o.stopSync:
			return
		case <-o.syncWake:
		}
		t := time.NewTimer(o.opts.SyncInterval)
		select {
		case <-o.stopSync:
			t.Stop()
			return
		case <-t.C:
		}
		o.mu.Lock()
		dirty := o.dirty
		o.dirty = false
		o.mu.Unlock()
		o.dbMu.Lock() // not closed meanwhile (closeIdleDisk)
		if db := o.db.Load(); dirty && db != nil {
			if err := db.Sync(); err != nil {
				o.log.Warn("sync outbox", "err", err)
			}
		}
		o.dbMu.Unlock()
	}
}
