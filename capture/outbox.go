package capture

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerlog"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/internal/losses"
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

// Outbox defaults.
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
	// acknowledgement before it is written to disk. A write takes well
	// under a millisecond (20 ms are left for it; the database, when not
	// open yet, is opened openLead before), so a step relayed more than
	// 50 ms before a SIGKILL is acknowledged or on disk. Shorter deadlines
	// write more steps when a loaded daemon answers late.
	DefaultPersistAfter = 30 * time.Millisecond

	// DefaultJournalPersistAfter replaces PersistAfter for the steps the
	// outbox's journal holds (see journal): they are safe from a killed
	// process already, and go to the database only when the daemon has
	// not taken them this long after their exchange ended.
	DefaultJournalPersistAfter = 5 * time.Second

	// journalLinger replaces deliverLinger while the journal works: one
	// daemon round trip every quarter of a second instead of one every
	// 10 ms while an agent makes calls (relaybench, paced: the p99 halved,
	// and the daemon's CPU per step).
	journalLinger = 250 * time.Millisecond

	deliverTimeout = 30 * time.Second
	// deliverLinger is how long delivery waits after a step arrives for
	// more to join its batch: one daemon round trip per batch instead of
	// per step while an agent makes calls one at a time. Each round trip
	// wakes the daemon and its database, which costs the relay's latency
	// more than the bytes do (1 ms: capture added ~24% to a paced call's
	// p50; 10 ms: ~12%; relaybench -pace 500). It leaves PersistAfter 20
	// ms for the daemon's answer, which comes within a few milliseconds
	// (the daemon acknowledges once written, syncing every 200 ms).
	deliverLinger = 10 * time.Millisecond
	maxBackoff    = 30 * time.Second
	lockName      = "sidecar.lock"
	dbName        = "db"
	corruptDir    = ".corrupt"
)

// Key prefixes in an outbox's Badger database.
const (
	prefixStep     = 's' // s + seq (big endian): a step to deliver
	prefixRejected = 'r' // r + seq: a step the daemon refused
)

// OutboxOptions configure an Outbox.
type OutboxOptions struct {
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
	// default (HINDSIGHT_DISK_RESERVE, else 32 MiB); negative: no check.
	DiskReserve int64
	// SyncInterval is how long after a write the database is fsynced
	// (a write is already safe from a killed process once it returns; the
	// sync guards against a machine crash). 0: DefaultSyncInterval.
	SyncInterval time.Duration
	// MaxMemBytes bounds the undelivered steps kept in memory, from which
	// they are delivered; older undelivered steps are written to disk and
	// read back from there. 0: DefaultMaxMemBytes.
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

// An Outbox is one sidecar's durable queue of steps on their way to the
// daemon: a Badger database under Home.Outboxes()/<id>/, locked by the
// sidecar that owns it. Steps are numbered by a gap-free sequence (their
// Seq; their Source is the outbox id) and delivered in that order by a
// background loop with capped exponential backoff. Delivered steps are
// removed; a clean Close removes the whole directory.
//
// Steps are delivered from memory first, a batch every quarter of a
// second, and Append writes them to the outbox's journal as it takes them
// (one write per call, safe from a killed process once it returns; see
// journal). A step is written to Badger only when the daemon has not
// acknowledged it JournalPersistAfter (5 s) after its exchange ended, when
// the daemon is unreachable or there is no Deliverer, when the steps in
// memory exceed MaxMemBytes, and at Close. A SIGKILL therefore loses no
// step whose Append returned; a drainer hands the journal's steps to the
// database and delivers them again (the daemon drops those it has). While
// the journal cannot be written the outbox delivers every 10 ms and writes
// to Badger what is not acknowledged PersistAfter (30 ms) after its
// exchange ended: the daemon stores a batch durably before acknowledging
// it, so a step is acknowledged or on disk within PersistAfter plus one
// write, and a SIGKILL loses none relayed 50 ms earlier. While the daemon
// keeps up, the outbox never opens its database: it is opened when the
// first step must be written, and closed when it has been empty for a
// while (closeIdleDisk).
//
// When the disk cannot be written (full, read-only, corrupt) steps are kept
// in memory up to MaxHeld and delivered from there, and the failure is
// logged and counted; nothing blocks the caller.
type Outbox struct {
	id   string
	dir  string
	opts OutboxOptions
	log  *slog.Logger
	c    *counters
	lock *os.File
	// db is opened when a step must first reach disk (see disk): while
	// the daemon keeps up, a sidecar runs no database at all, and its
	// compactors and syncs do not wake it. nil until then, and while it
	// cannot be opened.
	db          atomic.Pointer[badger.DB]
	syncWake    chan struct{} // syncLoop: steps were written
	dbMu        sync.Mutex    // one open of db at a time
	movedAside  bool          // a database that did not open was moved aside (once); dbMu
	openFailed  time.Time     // when db last failed to open; dbMu
	openErr     error         // why; dbMu
	cancel      context.CancelFunc
	notify      chan struct{} // a step was appended
	draining    chan struct{} // closed by Close: deliver what is left, then stop
	loopDone    chan struct{}
	syncDone    chan struct{}
	stopSync    chan struct{}
	closeOnce   sync.Once
	retMu       sync.Mutex // one retention pass at a time; guards lastWarn
	lastWarn    time.Time  // last retention warning
	warnedClock bool       // logged a clock jump once
	opened      time.Time  // when this process opened its own outbox (monotonic); zero for orphans

	// wmu serialises the changes of which steps are on disk (writes,
	// removals) with the bookkeeping of mem; it is taken before mu.
	wmu         sync.Mutex
	wake        chan struct{} // persistLoop: a step is waiting in memory
	jr          journal       // guarded by wmu
	journalOn   atomic.Bool   // the journal works (see journal)
	spaceLow    atomic.Bool   // the last space check failed (see checkSpace)
	allocSince  atomic.Int64  // bytes checked since the database's logs were last allocated ahead
	persistDone chan struct{}

	mu           sync.Mutex
	next         uint64        // seq of the next step
	mem          []entry       // the newest undelivered steps, in seq order
	memDisk      int           // mem[:memDisk] are on disk too; the rest only in memory
	memBytes     int           // their encoded size
	diskOnly     int           // undelivered steps on disk but not in mem; while > 0, delivery reads Badger
	removed      uint64        // the highest seq removed: steps leave in seq order, so all below are gone too
	dirty        bool          // written since the last sync
	lastFailed   bool          // the last delivery attempt failed
	writeFailing bool          // the last write to disk failed
	lastDropLog  time.Time     // when persist last logged dropped steps
	maxDue       time.Time     // no step held only in memory is due later (see pullDues)
	lastWrite    time.Time     // of steps to disk (see closeIdleDisk)
	keptRejected bool          // a refused step is in the database (until Close exports it)
	closed       bool          // Close has begun shutting the database
	room         chan struct{} // made by waitRoom, closed when delivered steps leave memory
}

// An entry is a step as the outbox keeps it: its seq and its JSON
// encoding, which is what is written to disk and delivered. raw is never
// modified once made. due is when a step held only in memory must be on
// disk.
type entry struct {
	seq uint64
	raw json.RawMessage
	due time.Time
}

// raws returns the encodings of batch.
func raws(batch []entry) []json.RawMessage {
	out := make([]json.RawMessage, len(batch))
	for i, e := range batch {
		out[i] = e.raw
	}
	return out
}

// newID returns a fresh outbox id: time-ordered, unique per process.
func newID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", time.Now().UTC().Format("20060102T150405.000000"), os.Getpid(), hex.EncodeToString(b[:]))
}

// OpenOutbox creates a new outbox for this process and starts its delivery
// loop. It fails only when the outbox directory cannot be created or
// locked; a database that cannot be opened leaves the outbox in memory
// mode (logged, counted in Stats.WriteErrors).
func OpenOutbox(opts OutboxOptions) (*Outbox, error) {
	return openOutbox(opts, &counters{})
}

func openOutbox(opts OutboxOptions, c *counters) (*Outbox, error) {
	if opts.Home == "" {
		return nil, errors.New("open outbox: no home directory")
	}
	if opts.Retention <= 0 {
		opts.Retention = DefaultRetention
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.MaxHeld <= 0 {
		opts.MaxHeld = DefaultMaxHeld
	}
	if opts.MaxHeldBytes <= 0 {
		opts.MaxHeldBytes = DefaultMaxHeldBytes
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.MaxMemBytes <= 0 {
		opts.MaxMemBytes = DefaultMaxMemBytes
	}
	if opts.PersistAfter <= 0 {
		opts.PersistAfter = DefaultPersistAfter
	}
	if opts.JournalPersistAfter <= 0 {
		opts.JournalPersistAfter = DefaultJournalPersistAfter
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	id := newID()
	root := opts.Home.Outboxes()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create outbox directory: %w", err)
	}
	// Build and lock the directory under a hidden name, then rename it, so
	// DrainOrphans never sees an outbox without its lock.
	tmp := filepath.Join(root, "."+id+".new")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("create outbox: %w", err)
	}
	lock, err := lockFile(filepath.Join(tmp, lockName))
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("lock outbox: %w", err)
	}
	dir := filepath.Join(root, id)
	if err := os.Rename(tmp, dir); err != nil {
		lock.Close()
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("create outbox: %w", err)
	}
	o := &Outbox{id: id, dir: dir, opts: opts, log: log.With("outbox", id), c: c, lock: lock, next: 1, opened: time.Now(),
		notify: make(chan struct{}, 1), draining: make(chan struct{}), loopDone: make(chan struct{}),
		syncDone: make(chan struct{}), stopSync: make(chan struct{}),
		wake: make(chan struct{}, 1), persistDone: make(chan struct{}), syncWake: make(chan struct{}, 1)}
	o.jr.dir = dir
	o.journalOn.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	go o.deliverLoop(ctx)
	go o.syncLoop()
	go o.persistLoop()
	return o, nil
}

// ID is the outbox id, the Source of its steps.
func (o *Outbox) ID() string { return o.id }

// Dir is the outbox directory.
func (o *Outbox) Dir() string { return o.dir }

// disk returns the outbox's database, opening it the first time a step
// must be written. A database that does not open is moved aside (kept for
// inspection) and a fresh one tried once; when that fails too the error is
// returned, the steps stay in memory (see persist), and a write openRetry
// later tries again (without moving anything aside again).
func (o *Outbox) disk() (*badger.DB, error) {
	if db := o.db.Load(); db != nil {
		return db, nil
	}
	o.dbMu.Lock()
	defer o.dbMu.Unlock()
	if db := o.db.Load(); db != nil {
		return db, nil
	}
	if time.Since(o.openFailed) < openRetry {
		return nil, o.openErr // a failing disk is not tried at every write
	}
	// Opening writes the memtable log's header through a mapped file.
	if err := diskspace.Check(o.dir, o.reserve(), 0); err != nil {
		o.noteLow(err)
		return nil, fmt.Errorf("open outbox database: %w", err)
	}
	path := filepath.Join(o.dir, dbName)
	db, err := openDBContained(path, o.log)
	if err != nil {
		if _, serr := os.Stat(path); serr == nil && !o.movedAside && !isNoSpace(err) {
			o.movedAside = true
			o.c.corrupt.Add(1)
			aside := path + ".corrupt-" + strconv.FormatInt(time.Now().UnixNano(), 10)
			o.log.Error("cannot open outbox database; moved aside, starting a fresh one", "err", err, "to", aside)
			_ = os.Rename(path, aside)
			db, err = openDBContained(path, o.log)
		}
		if err != nil {
			o.openFailed, o.openErr = time.Now(), fmt.Errorf("open outbox database: %w", err)
			return nil, o.openErr
		}
	}
	o.db.Store(db)
	o.allocSince.Store(allocateAhead) // allocate its new logs at the next check
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
func (o *Outbox) closeIdleDisk(now time.Time) {
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
		WithLogger(badgerlog.New(log)).
		WithLoggingLevel(badger.WARNING).
		WithSyncWrites(false).
		// Smaller memtables and tables than Badger's defaults: steps are
		// written and removed within milliseconds, so what Badger holds is
		// mostly tombstones, and its buffers (a memtable arena, the table
		// builders' allocators that a flush or compaction takes from a
		// pool of up to eight) scale with these sizes. Under load 8 MB
		// memtables and 2 MB tables held ~58 MB of the sidecar's heap,
		// these ~30 MB; 2 MB memtables held less again but cost 1.6× the
		// CPU per step while a backlog is written (BenchmarkRecorder/steps).
		//
		// Steps stay in the LSM tree (a high value threshold): a write to
		// the memtable's WAL survives a SIGKILL once it returns, a write
		// to the value log does not (TestSIGKILLLosesNothingRelayed fails
		// with the values there), although it would cost less than half
		// the CPU per step written and removed.
		WithMemTableSize(4 << 20).
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

func stepKey(prefix byte, seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

// journaling reports whether Append journals the steps it is handed
// (unless a backlog builds up) rather than writing them to disk at once or
// within PersistAfter.
func (o *Outbox) journaling() bool { return o.opts.Deliverer != nil && o.journalOn.Load() }

// Append numbers steps (setting Source and Seq) and queues them for
// delivery. A step is kept in memory until the daemon acknowledges it, and
// written to disk when that has not happened PersistAfter after its
// exchange ended (see Outbox); with no Deliverer, or while the daemon is
// unreachable, Append writes before it returns. When the disk fails the
// steps are held in memory instead (the error is logged and counted); only
// steps beyond MaxHeld are lost, counted in Stats.Dropped. Append is called
// from one goroutine at a time in the Recorder, but is safe for concurrent
// use.
func (o *Outbox) Append(steps []hindsight.Step) {
	if len(steps) == 0 {
		return
	}
	o.wmu.Lock()
	defer o.wmu.Unlock()
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		o.c.lose(losses.AtExit, int64(len(steps)), "steps reached a closed outbox")
		o.log.Error("steps reached a closed outbox; lost", "steps", len(steps))
		return
	}
	now := time.Now()
	// Nothing will acknowledge these steps soon: write them now.
	atOnce := o.opts.Deliverer == nil || o.lastFailed || o.writeFailing
	// Steps written to Badger at once need no journal, nor does a backlog
	// past half of MaxMemBytes, where the Recorder's back-pressure holds
	// capture (see waitRoom): what passes it anyway (a batch of large
	// steps, a daemon that stopped answering) goes to Badger.
	journaled := !atOnce && o.journalOn.Load() && o.memBytes < o.opts.MaxMemBytes/2
	after := o.opts.PersistAfter
	if journaled {
		after = o.opts.JournalPersistAfter
	}
	waiting := o.memDisk < len(o.mem)
	added := 0
	var minDue, maxDue time.Time
	for i := range steps {
		steps[i].Source, steps[i].Seq = o.id, o.next
		s := &steps[i]
		raw, err := wire.AppendCompactStep(nil, s)
		if err != nil {
			// Not numbered: the daemon must see no gap in the seqs.
			steps[i].Seq = 0
			o.c.lose(losses.Encode, 1, err.Error())
			o.log.Error("cannot encode step; lost", "method", steps[i].Method, "tool", steps[i].Tool, "err", err)
			continue
		}
		due := now
		if !atOnce {
			due = now.Add(after)
			if end := s.EndedAt.Add(after); !s.EndedAt.IsZero() && end.Before(due) {
				due = end
			}
		}
		o.mem = append(o.mem, entry{seq: o.next, raw: raw, due: due})
		o.memBytes += len(raw)
		o.next++
		added++
		if minDue.IsZero() || due.Before(minDue) {
			minDue = due
		}
		maxDue = later(maxDue, due)
	}
	if added > 0 && !journaled && o.pullDues(len(o.mem)-added, minDue) {
		// persist writes the steps held only in memory from the oldest
		// on: journaled ones before these must not hold them back, and
		// persistLoop's timer was set for them.
		waiting = false
	}
	o.maxDue = later(o.maxDue, maxDue)
	o.c.depth.Add(int64(added))
	o.mu.Unlock()
	if journaled && added > 0 {
		o.journal(now, added)
	}
	// At once: every step held only in memory, as the older ones may not
	// be due for a while.
	o.persist(now, atOnce)
	if !waiting {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// journal writes the last added steps of mem to the journal. When that
// fails the journal is given up, and those steps are due on disk
// PersistAfter from now, as without one. o.wmu is held.
func (o *Outbox) journal(now time.Time, added int) {
	o.mu.Lock()
	batch := slices.Clone(o.mem[len(o.mem)-added:])
	o.mu.Unlock()
	var size int64
	for _, e := range batch {
		size += int64(len(e.raw)) + journalHeader
	}
	err := o.checkSpace(size)
	if err == nil {
		err = o.jr.write(batch)
	}
	if err == nil {
		return
	}
	if isNoSpace(err) {
		// Not journaled: these steps are handled as without a journal
		// (and held in memory while the disk has no room); the journal
		// is tried again for the next ones.
		o.jr.failing = false
	} else {
		o.journalOn.Store(false)
		o.c.writeErrors.Add(1)
		o.log.Error("cannot write outbox journal; steps the daemon has not taken go to the database sooner", "err", err)
	}
	o.mu.Lock()
	o.pullDues(len(o.mem), now.Add(o.opts.PersistAfter))
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// pullDues brings the deadlines of the steps held only in memory in
// mem[:end] forward to due, and reports whether it moved any. o.mu is held.
func (o *Outbox) pullDues(end int, due time.Time) bool {
	if !o.maxDue.After(due) {
		return false
	}
	for i := o.memDisk; i < end; i++ {
		if o.mem[i].due.After(due) {
			o.mem[i].due = due
		}
	}
	o.maxDue = due
	for _, e := range o.mem[end:] {
		o.maxDue = later(o.maxDue, e.due)
	}
	return true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// releaseJournal removes the journal segments whose steps have all left
// memory. o.wmu is held.
func (o *Outbox) releaseJournal() {
	o.mu.Lock()
	first := o.next
	if o.memDisk < len(o.mem) {
		first = o.mem[o.memDisk].seq
	}
	o.mu.Unlock()
	o.jr.release(first)
}

// persist writes to disk the steps held only in memory that are due by
// now (all of them when all is set) and those that must leave memory
// because it holds more than MaxMemBytes, then lets the latter go. When
// the write fails they stay in memory, up to MaxHeld. o.wmu is held.
func (o *Outbox) persist(now time.Time, all bool) {
	o.mu.Lock()
	k := o.memDisk
	for k < len(o.mem) && (all || !o.mem[k].due.After(now)) {
		k++
	}
	over, bytes := 0, o.memBytes
	for bytes > o.opts.MaxMemBytes && over < len(o.mem) {
		bytes -= len(o.mem[over].raw)
		over++
	}
	k = max(k, over)
	batch := o.mem[o.memDisk:k]
	o.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	err := o.write(batch)
	defer o.releaseJournal() // after mu is unlocked
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		if o.writeFailing {
			o.log.Info("outbox writable again")
		}
		o.writeFailing = false
		o.memDisk = k
		o.dirty = true
		o.lastWrite = now
		select {
		case o.syncWake <- struct{}{}:
		default:
		}
		o.c.spilled.Add(int64(len(batch)))
		o.c.held.Store(0)
		o.c.heldBytes.Store(0)
		o.trimMem()
		return
	}
	if !isNoSpace(err) {
		o.c.writeErrors.Add(1)
	}
	was := o.writeFailing
	o.writeFailing = true
	o.freed()
	// Keep the oldest steps (the closest to being delivered) within
	// MaxHeld and MaxHeldBytes; the newest go.
	keep, heldBytes := o.memDisk, 0
	for keep < len(o.mem) && keep-o.memDisk < o.opts.MaxHeld && heldBytes+len(o.mem[keep].raw) <= o.opts.MaxHeldBytes {
		heldBytes += len(o.mem[keep].raw)
		keep++
	}
	lost := len(o.mem) - keep
	if lost > 0 {
		for _, e := range o.mem[keep:] {
			o.memBytes -= len(e.raw)
		}
		clear(o.mem[keep:])
		o.mem = o.mem[:keep]
		reason := losses.WriteError
		if isNoSpace(err) {
			reason = losses.DiskFull
		}
		o.c.lose(reason, int64(lost), err.Error())
		o.c.depth.Add(-int64(lost))
	}
	o.c.held.Store(int64(len(o.mem) - o.memDisk))
	o.c.heldBytes.Store(int64(heldBytes))
	now2 := time.Now()
	if !was || (lost > 0 && now2.Sub(o.lastDropLog) > 10*time.Second) {
		o.lastDropLog = now2
		o.log.Error("cannot write outbox; holding steps in memory", "err", err, "held", len(o.mem)-o.memDisk,
			"max_held", o.opts.MaxHeld, "max_held_bytes", o.opts.MaxHeldBytes, "dropped", lost, "dropped_total", o.c.dropped.Load())
	}
}

// trimMem lets the oldest steps that are on disk leave memory while it
// holds more than MaxMemBytes. o.mu is held.
func (o *Outbox) trimMem() {
	drop := 0
	for o.memBytes > o.opts.MaxMemBytes && drop < o.memDisk {
		o.memBytes -= len(o.mem[drop].raw)
		drop++
	}
	if drop > 0 {
		o.diskOnly += drop
		o.memDisk -= drop
		clear(o.mem[:drop]) // let the bodies go; append moves the rest when it grows
		o.mem = o.mem[drop:]
	}
}

// forget removes the steps of gone from mem and from the count of steps
// on disk only. o.mu is held.
func (o *Outbox) forget(gone map[uint64]bool) {
	memFrom := o.memFrom()
	for seq := range gone {
		if seq < memFrom && o.diskOnly > 0 {
			o.diskOnly--
		}
	}
	j, disk := 0, o.memDisk
	for i, e := range o.mem {
		if gone[e.seq] {
			o.memBytes -= len(e.raw)
			if i < o.memDisk {
				disk--
			}
			continue
		}
		o.mem[j] = e
		j++
	}
	clear(o.mem[j:]) // let the bodies go
	o.mem, o.memDisk = o.mem[:j], disk
	if o.writeFailing {
		o.c.held.Store(int64(len(o.mem) - o.memDisk))
		n := 0
		for _, e := range o.mem[o.memDisk:] {
			n += len(e.raw)
		}
		o.c.heldBytes.Store(int64(n))
	}
}

// memFrom is the seq of the oldest step in memory: every undelivered step
// below it is on disk only. o.mu is held.
func (o *Outbox) memFrom() uint64 {
	if len(o.mem) > 0 {
		return o.mem[0].seq
	}
	return ^uint64(0)
}

// onDisk reports which of steps are stored in Badger. o.mu is held.
func (o *Outbox) onDisk(steps []entry) []entry {
	memFrom, lastDisk := o.memFrom(), uint64(0)
	if o.memDisk > 0 {
		lastDisk = o.mem[o.memDisk-1].seq
	}
	var out []entry
	for _, e := range steps {
		if e.seq < memFrom || e.seq <= lastDisk {
			out = append(out, e)
		}
	}
	return out
}

// write stores entries in as few transactions as Badger allows.
func (o *Outbox) write(entries []entry) error {
	var need int64
	for _, e := range entries {
		need += int64(len(e.raw)) + 32
	}
	if err := o.checkSpace(need); err != nil {
		return fmt.Errorf("write outbox: %w", err)
	}
	db, err := o.disk()
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

// persistLoop writes steps held only in memory to disk when they are due.
// While the database is not open yet, it opens it openLead before the
// first such deadline, so that the write still makes it.
func (o *Outbox) persistLoop() {
	defer close(o.persistDone)
	t := time.NewTimer(time.Hour)
	t.Stop()
	tried := false // to open the database ahead of a deadline, and failed
	for {
		o.mu.Lock()
		var due time.Time
		if o.memDisk < len(o.mem) {
			due = o.mem[o.memDisk].due
		}
		failing := o.writeFailing
		o.mu.Unlock()
		if o.db.Load() != nil {
			tried = false // closeIdleDisk may close it again
		}
		opening := false
		if !due.IsZero() {
			d := time.Until(due)
			if opening = o.db.Load() == nil && !tried && !failing; opening {
				d -= openLead
			}
			if failing {
				d = max(d, time.Second) // retry a failing disk at a gentle pace
			}
			t.Reset(d)
		}
		select {
		case <-o.stopSync:
			t.Stop()
			return
		case <-o.wake:
			t.Stop()
		case <-t.C:
			if opening {
				_, err := o.disk()
				tried = err != nil // a failure is the write's to report
				continue
			}
			o.wmu.Lock()
			o.persist(time.Now(), false)
			o.wmu.Unlock()
		}
	}
}

// openLead is how long before a step must be on disk the outbox opens its
// database, when it is not open yet: opening takes 5–15 ms, more on a
// loaded machine, and the write must still land within PersistAfter.
const openLead = 15 * time.Millisecond

// syncLoop fsyncs the database SyncInterval after steps are written; the
// steps written meanwhile share the sync. It sleeps while nothing is
// written, and shutdown syncs what is left.
func (o *Outbox) syncLoop() {
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

// linger is how long delivery waits for a batch to fill (see journal).
func (o *Outbox) linger() time.Duration {
	if o.journalOn.Load() {
		return journalLinger
	}
	return deliverLinger
}

// lingerFor waits for a batch to fill: linger, or until a full batch is
// waiting. It reports whether Close began draining, and whether ctx is done.
func (o *Outbox) lingerFor(ctx context.Context) (draining, done bool) {
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
func (o *Outbox) deliverLoop(ctx context.Context) {
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
func (o *Outbox) deliver(ctx context.Context, batch []entry) error {
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
func (o *Outbox) send(ctx context.Context, batch []entry) (err error) {
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
func (o *Outbox) isolate(ctx context.Context, batch []entry, batchErr error) {
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

// reject moves a refused step aside (kept until retention, for inspection,
// then exported to Outboxes()/.rejected/) and delivers its stub in its
// place (see stubFor).
func (o *Outbox) reject(ctx context.Context, e entry, err error) {
	o.deliverStub(ctx, e)
	o.c.rejected.Add(1)
	o.c.ledger.Add(losses.Rejected, 1, err.Error())
	var s struct{ Method, Tool string }
	_ = json.Unmarshal(e.raw, &s)
	o.log.Error("daemon refused a step; set aside", "seq", e.seq, "method", s.Method, "tool", s.Tool, "err", err)
	o.wmu.Lock()
	derr := o.checkSpace(int64(len(e.raw)) + 32)
	var db *badger.DB
	if derr == nil {
		db, derr = o.disk()
	}
	if derr == nil {
		derr = db.Update(func(txn *badger.Txn) error { return txn.Set(stepKey(prefixRejected, e.seq), e.raw) })
	}
	if derr == nil {
		o.mu.Lock()
		o.keptRejected = true
		o.mu.Unlock()
	}
	o.wmu.Unlock()
	if derr != nil {
		o.log.Error("cannot keep a refused step; lost", "seq", e.seq, "err", derr)
	}
	o.remove([]entry{e})
}

func (o *Outbox) setFailed(failed bool, err error) {
	o.mu.Lock()
	was := o.lastFailed
	o.lastFailed = failed
	if failed && !was {
		o.freed() // waitRoom: nothing will free memory soon
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
func (o *Outbox) nextBatch(n int) []entry {
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
func (o *Outbox) remove(steps []entry) {
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
	gone := make(map[uint64]bool, len(steps))
	for _, e := range steps {
		gone[e.seq] = true
		o.removed = max(o.removed, e.seq)
	}
	o.forget(gone)
	o.freed()
	o.mu.Unlock()
	o.releaseJournal()
	o.c.depth.Add(-int64(len(steps)))
}

// enforceRetention drops undelivered steps older than the retention period
// and warns when the oldest one nears it.
func (o *Outbox) enforceRetention() {
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
			gone := make(map[uint64]bool, len(expired))
			for _, k := range expired {
				gone[binary.BigEndian.Uint64(k[1:])] = true
			}
			o.mu.Lock()
			o.forget(gone)
			o.mu.Unlock()
			o.c.expired.Add(int64(len(expired)))
			o.c.ledger.Add(losses.Expired, int64(len(expired)), "undelivered past the retention period "+o.opts.Retention.String())
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

// exportRejected writes the steps the daemon refused to
// Outboxes()/.rejected/<id>.jsonl (they are redacted already), so an
// outbox can be removed without losing them silently.
func (o *Outbox) exportRejected() error {
	var lines []byte
	_ = o.db.Load().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixRejected}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			_ = it.Item().Value(func(v []byte) error {
				lines = append(appendLine(lines, v), '\n')
				return nil
			})
		}
		return nil
	})
	if len(lines) == 0 {
		return nil
	}
	dir := filepath.Join(filepath.Dir(o.dir), ".rejected")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("export rejected steps: %w", err)
	}
	path := filepath.Join(dir, o.id+".jsonl")
	if err := os.WriteFile(path, lines, 0o600); err != nil {
		return fmt.Errorf("export rejected steps: %w", err)
	}
	o.log.Warn("steps the daemon refused were kept in a file", "path", path)
	return nil
}

// appendLine appends a stored step as one line of JSON: whole (a step's
// compact encoding gets its derived bodies back) and compacted, since
// wire.AppendStep keeps the bodies' whitespace (newlines included); an
// object encoding/json cannot read as it is, without its newlines; or as a
// JSON string when it is not JSON at all.
func appendLine(lines, v []byte) []byte {
	var s hindsight.Step
	if wire.UnmarshalCompact(v, &s) == nil {
		if full, err := wire.AppendStep(nil, &s); err == nil {
			v = full
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) == nil {
		return append(lines, buf.Bytes()...)
	}
	if len(v) > 1 && v[0] == '{' && v[len(v)-1] == '}' {
		// An object encoding/json cannot read (nested past its depth
		// limit, say): kept as it is, on one line. Raw newlines in JSON
		// are whitespace between tokens (in strings they are escaped).
		for _, c := range v {
			if c != '\n' && c != '\r' {
				lines = append(lines, c)
			}
		}
		return lines
	}
	q, _ := json.Marshal(string(v))
	return append(lines, q...)
}

// Close stops the outbox: it delivers what is left until ctx is done, then
// closes the database. An emptied outbox is removed; one with undelivered
// steps stays for the next sidecar or the daemon (DrainOrphans). Steps
// still held in memory are lost, and counted in Stats.Dropped.
//
// A ctx without a deadline gets DefaultDrainTimeout, so a daemon that is
// down cannot hold a closing sidecar for ever.
func (o *Outbox) Close(ctx context.Context) error {
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

func (o *Outbox) shutdown() error {
	o.wmu.Lock()
	o.persist(time.Now(), true)
	o.mu.Lock()
	o.closed = true
	o.freed()
	// Steps the database did not take are lost, unless the journal has
	// them: then it stays, for the next sidecar or the daemon.
	n := len(o.mem) - o.memDisk
	kept := n > 0 && o.journalOn.Load()
	if n > 0 && !kept {
		reason := losses.AtExit
		if o.spaceLow.Load() {
			reason = losses.DiskFull
		}
		o.c.lose(reason, int64(n), "the outbox closed with the steps only in memory")
		o.c.depth.Add(-int64(n))
		o.log.Error("outbox closed with steps only in memory; they are lost", "steps", n)
	}
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
	if empty {
		if e := os.RemoveAll(o.dir); e != nil && err == nil {
			err = fmt.Errorf("remove outbox: %w", e)
		}
	} else {
		o.log.Warn("outbox closed with undelivered steps; the next sidecar or the daemon will deliver them", "depth", o.c.depth.Load(), "dir", o.dir)
	}
	o.lock.Close()
	return err
}

// importJournal writes the steps of a dead sidecar's journal to its
// outbox's database (a step already there is written again, the same).
func importJournal(db *badger.DB, steps []entry) error {
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for _, e := range steps {
		if err := wb.Set(stepKey(prefixStep, e.seq), e.raw); err != nil {
			return fmt.Errorf("import journal: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("import journal: %w", err)
	}
	return nil
}

func countKeys(db *badger.DB, prefix byte) int {
	n := 0
	_ = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefix}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n
}

// DrainOrphans delivers the outboxes left behind by sidecars that died
// (their lock is free), in order, and removes each one it empties. Live
// sidecars' outboxes are left alone. An outbox that cannot be opened is
// moved aside to Outboxes()/.corrupt/ and logged. It returns how many
// steps it delivered; it stops at the first delivery error (the daemon is
// unreachable) and leaves the rest for a later call.
func DrainOrphans(ctx context.Context, home hindsight.Home, d Deliverer) (int, error) {
	return drainOrphans(ctx, home, d, slog.Default(), &counters{})
}

func drainOrphans(ctx context.Context, home hindsight.Home, d Deliverer, log *slog.Logger, c *counters) (int, error) {
	root := home.Outboxes()
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list outboxes: %w", err)
	}
	total := 0
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		n, err := drainOne(ctx, home, filepath.Join(root, e.Name()), e.Name(), d, log, c)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func drainOne(ctx context.Context, home hindsight.Home, dir, id string, d Deliverer, log *slog.Logger, c *counters) (int, error) {
	lock, err := lockFile(filepath.Join(dir, lockName))
	if errors.Is(err, errLocked) || errors.Is(err, fs.ErrNotExist) {
		return 0, nil // a live sidecar, or another drainer just removed it
	}
	if err != nil {
		return 0, fmt.Errorf("lock outbox %s: %w", id, err)
	}
	defer lock.Close()
	log = log.With("outbox", id)
	// Draining writes to the dead sidecar's database (its journal, the
	// removal of delivered steps), through mapped files.
	if err := diskspace.Check(dir, diskspace.Reserve(diskspace.DefaultSidecarReserve), 0); err != nil {
		return 0, fmt.Errorf("drain outbox %s: %w", id, err)
	}
	if n := removeDeadSpill(dir, log); n > 0 {
		if err := losses.AddTo(string(home), id, "", losses.Crash, n, "spilled before redaction by a sidecar that died"); err != nil {
			log.Warn("record lost steps", "err", err)
		}
	}
	rejected0, expired0 := c.rejected.Load(), c.expired.Load()
	defer func() {
		if n := c.rejected.Load() - rejected0; n > 0 {
			_ = losses.AddTo(string(home), id, "", losses.Rejected, n, "refused by the daemon while draining a dead sidecar's outbox")
		}
		if n := c.expired.Load() - expired0; n > 0 {
			_ = losses.AddTo(string(home), id, "", losses.Expired, n, "undelivered past the retention period")
		}
	}()
	journaled, segments := readJournal(dir, log)
	if _, err := os.Stat(filepath.Join(dir, dbName)); errors.Is(err, os.ErrNotExist) && len(journaled) == 0 {
		losses.Remove(string(home), id) // a ledger that records nothing
		return 0, os.RemoveAll(dir)     // the sidecar died before writing anything
	}
	db, err := openDBContained(filepath.Join(dir, dbName), log)
	if err != nil && isNoSpace(err) {
		return 0, fmt.Errorf("drain outbox %s: %w", id, err)
	}
	if err != nil {
		c.corrupt.Add(1)
		aside := filepath.Join(filepath.Dir(dir), corruptDir, id+"-"+strconv.FormatInt(time.Now().Unix(), 10))
		_ = os.MkdirAll(filepath.Dir(aside), 0o700)
		if rerr := os.Rename(dir, aside); rerr != nil {
			log.Error("corrupt outbox could not be moved aside", "err", err, "move_err", rerr)
		} else {
			log.Error("corrupt outbox moved aside", "err", err, "to", aside)
		}
		return 0, nil
	}
	if len(journaled) > 0 {
		// What the sidecar held only in memory: some of it was delivered
		// already, which the daemon will notice.
		if err := importJournal(db, journaled); err != nil {
			db.Close()
			return 0, fmt.Errorf("drain outbox %s: %w", id, err)
		}
		for _, p := range segments {
			_ = os.Remove(p)
		}
	}
	o := &Outbox{id: id, dir: dir, log: log, c: c, opts: OutboxOptions{Deliverer: d, BatchSize: DefaultBatchSize, Retention: DefaultRetention}}
	o.db.Store(db)
	o.diskOnly = countKeys(db, prefixStep)
	o.c.depth.Add(int64(o.diskOnly))
	o.enforceRetention()
	delivered := 0
	for ctx.Err() == nil {
		batch := o.nextBatch(DefaultBatchSize)
		if len(batch) == 0 {
			break
		}
		before := c.delivered.Load()
		err := o.deliver(ctx, batch)
		delivered += int(c.delivered.Load() - before)
		if err != nil {
			db.Close()
			return delivered, fmt.Errorf("drain outbox %s: %w", id, err)
		}
	}
	empty := countKeys(db, prefixStep) == 0
	var exportErr error
	if empty {
		exportErr = o.exportRejected()
	}
	if err := db.Close(); err != nil {
		return delivered, fmt.Errorf("close outbox %s: %w", id, err)
	}
	if exportErr != nil {
		return delivered, exportErr
	}
	if empty {
		if err := os.RemoveAll(dir); err != nil {
			return delivered, fmt.Errorf("remove outbox %s: %w", id, err)
		}
		log.Info("drained orphaned outbox", "steps", delivered)
		losses.Remove(string(home), id) // a ledger that records nothing
	}
	return delivered, ctx.Err()
}
