package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"
)

// DefaultIdleGap ends a task after this much quiet.
const DefaultIdleGap = 10 * time.Minute

// Key layout of the trace store. Separators are NUL bytes, which task ids,
// sources and group names never contain (see validID).
//
//	run/SOURCE\0FIRST(8) → LAST(8)        runs of consecutive seqs ingested (dedupe)
//	seq/SOURCE\0SEQ(8)   → TASKID\0INDEX  a step ingested (dedupe; stores before runs)
//	task/TASKID          → taskRec (JSON)
//	step/TASKID\0IDX(4)  → hindsight.Step (JSON), or the steps IDX,
//	                       IDX+1… comma-separated (a chunk: one batch's
//	                       steps of the task, as the batch had them)
//	grp/GROUP\0START(8)  → TASKID         tasks of a group by start time
//	open/TASKID          → ""             tasks not final yet
//	unq/TASKID           → ""             final tasks not yet handed to reflection
//	closed/SESSION       → closeRec       sessions the sidecars said ended
//	hw/SOURCE            → SEQ(8)         highest seq ingested from a source
var (
	pSeq    = []byte("seq/")
	pRun    = []byte("run/")
	pTask   = []byte("task/")
	pStep   = []byte("step/")
	pGroup  = []byte("grp/")
	pOpen   = []byte("open/")
	pUnq    = []byte("unq/")
	pClosed = []byte("closed/")
	pHW     = []byte("hw/")
)

func key(prefix []byte, parts ...[]byte) []byte {
	k := append([]byte(nil), prefix...)
	for i, p := range parts {
		if i > 0 {
			k = append(k, 0)
		}
		k = append(k, p...)
	}
	return k
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// taskRec is a task as stored: the public Task without its steps, and what
// segmentation and finality need.
type taskRec struct {
	hindsight.Task
	Group      string          `json:"group"`
	LastAt     time.Time       `json:"last_at"`     // latest step time
	IngestedAt time.Time       `json:"ingested_at"` // wall clock of the last step's arrival
	Sessions   map[string]bool `json:"sessions"`    // session id → closed
	// FinalAt is when the agent said the task was finished (MarkFinal);
	// zero otherwise. Such a task takes no step that started after it
	// (unless it names the task explicitly), and is final again at the
	// next pass when a late step reopened it.
	FinalAt time.Time `json:"final_at,omitzero"`
}

// clone returns a copy of r that shares no memory with it, not even its
// strings' (which may be views of a request's body).
func (r *taskRec) clone() *taskRec {
	c := *r
	c.ID, c.Group, c.Reflection = strings.Clone(r.ID), strings.Clone(r.Group), strings.Clone(r.Reflection)
	c.Steps = nil
	if r.Servers != nil {
		c.Servers = make([]string, len(r.Servers))
		for i, s := range r.Servers {
			c.Servers[i] = strings.Clone(s)
		}
	}
	if r.Sessions != nil {
		c.Sessions = make(map[string]bool, len(r.Sessions))
		for k, v := range r.Sessions {
			c.Sessions[strings.Clone(k)] = v
		}
	}
	return &c
}

// update makes r, a record of TraceStore.latest, rec: a later state of
// the same task. Like clone, it keeps no memory of rec's that may be a
// request's body: strings equal to r's stay r's, and r's sessions are
// kept when rec has the same ones (most batches add none).
func (r *taskRec) update(rec *taskRec) {
	old := *r
	*r = *rec
	r.ID, r.Steps = old.ID, nil
	r.Group, r.Reflection = keep(old.Group, rec.Group), keep(old.Reflection, rec.Reflection)
	if (rec.Servers == nil) != (old.Servers == nil) || !slices.Equal(rec.Servers, old.Servers) {
		r.Servers = nil
		if rec.Servers != nil {
			r.Servers = make([]string, len(rec.Servers))
			for i, s := range rec.Servers {
				r.Servers[i] = strings.Clone(s)
			}
		}
	} else {
		r.Servers = old.Servers
	}
	r.Sessions = old.Sessions
	if !sameKeys(rec.Sessions, old.Sessions) {
		r.Sessions = nil
		if rec.Sessions != nil {
			r.Sessions = make(map[string]bool, len(rec.Sessions))
		}
	}
	for k, v := range rec.Sessions {
		if cur, ok := r.Sessions[k]; !ok || cur != v {
			// Assigning to a string key stores the key given: the
			// stored one must be r's own.
			delete(r.Sessions, k)
			r.Sessions[strings.Clone(k)] = v
		}
	}
}

// keep returns old when it equals s, else a clone of s.
func keep(old, s string) string {
	if old == s {
		return old
	}
	return strings.Clone(s)
}

// sameKeys reports whether a and b are both nil, or both not and with the
// same keys.
func sameKeys(a, b map[string]bool) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// copy returns a copy of r that ingest may change without changing r: a
// record of TraceStore.latest, whose strings are its own (see clone).
func (r *taskRec) copy() *taskRec {
	c := *r
	c.Servers = slices.Clip(r.Servers) // account appends, then sorts
	if r.Sessions != nil {
		c.Sessions = maps.Clone(r.Sessions)
	}
	return &c
}

// closeRec records that a sidecar said a session ended. When the sidecar
// named the last seq it sent, the close waits for that step to arrive.
type closeRec struct {
	At      time.Time `json:"at"`
	Source  string    `json:"source,omitempty"`
	LastSeq uint64    `json:"last_seq,omitempty"`
	Pending bool      `json:"pending,omitempty"`
}

// TraceOptions configure a TraceStore.
type TraceOptions struct {
	IdleGap time.Duration         // 0: DefaultIdleGap
	Logger  *slog.Logger          // nil: slog.Default()
	Now     func() time.Time      // nil: time.Now (tests set a clock)
	Badger  func(*badger.Options) // adjusts Badger's options; may be nil
	// SyncInterval is how often written steps are synced to disk; 0:
	// DefaultSyncInterval. See TraceStore.
	SyncInterval time.Duration
}

// DefaultSyncInterval is how often the trace store syncs what it wrote.
const DefaultSyncInterval = 200 * time.Millisecond

// TraceStore keeps steps in Badger and segments them into tasks.
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
type TraceStore struct {
	db      *badger.DB
	compact *Compactor
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
	// seen, so the common in-order step needs no dedupe lookup.
	hw map[string]highWater
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

// maxCachedCloses bounds TraceStore.closes (a session is an agent's run
// of a server: a long-lived daemon sees many).
const maxCachedCloses = 4096

// cacheClose records the committed close record of session id; t.mu is
// held.
func (t *TraceStore) cacheClose(id string, c closeState) {
	if _, ok := t.closes[id]; !ok {
		if len(t.closes) >= maxCachedCloses {
			clear(t.closes)
		}
		id = strings.Clone(id) // not a view of a request's body
	}
	c.dirty = false
	t.closes[id] = c
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

// OpenTraceStore opens (creating) the trace store in dir.
func OpenTraceStore(dir string, opt TraceOptions) (*TraceStore, error) {
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
	t := &TraceStore{db: db, dir: dir, logger: opt.Logger, gap: opt.IdleGap, now: opt.Now, started: opt.Now(),
		hw: map[string]highWater{}, latest: map[string]*taskRec{}, closes: map[string]closeState{}, stop: make(chan struct{}), synced: make(chan struct{})}
	t.dirty.kick = make(chan struct{}, 1)
	t.compact = StartCompactor(db, opt.Logger)
	t.trim = startTrimmer(dir, opt.Logger)
	go t.syncLoop(opt.SyncInterval)
	return t, nil
}

// syncLoop syncs the database interval after it was written, until
// Close. It sleeps while nothing is written: an idle daemon does not wake
// for it.
func (t *TraceStore) syncLoop(interval time.Duration) {
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
func (t *TraceStore) MarkWritten() { t.dirty.Store(true) }

// traceBadgerOptions are the daemon's Badger settings with what suits a
// trace store: a step's JSON (most are over a KiB) goes to the value log,
// written once, and the LSM tree holds its pointer, so memtable flushes and
// compactions do not copy step bodies again and again. Steps are never
// rewritten; task records, which are, stay under the threshold (they are a
// few hundred bytes), so the value log holds next to no garbage. Writes
// are serialized by the store's mutex, so Badger need not track conflicts.
func traceBadgerOptions(dir string, logger *slog.Logger) badger.Options {
	return badgerOptions(dir, logger).
		WithSyncWrites(false). // synced by syncLoop (see TraceStore)
		WithValueThreshold(traceValueThreshold).
		WithDetectConflicts(false)
}

// traceValueThreshold is the size from which a trace store's value goes to
// the value log.
const traceValueThreshold = 1 << 10

// Close stops the sync loop and the compactor and closes the store, which
// syncs it.
func (t *TraceStore) Close() error {
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
// listed in this file).
func (t *TraceStore) DB() *badger.DB { return t.db }

// IdleGap returns the idle gap that splits tasks.
func (t *TraceStore) IdleGap() time.Duration { return t.gap }

// IngestResult says what became of a batch.
type IngestResult struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// appendJSON appends r's JSON as encoding/json's Encoder writes it, with
// its newline, without reflection: it answers every step batch.
func (r IngestResult) appendJSON(b []byte) []byte {
	b = strconv.AppendInt(append(b, `{"accepted":`...), int64(r.Accepted), 10)
	b = strconv.AppendInt(append(b, `,"duplicates":`...), int64(r.Duplicates), 10)
	return append(b, "}\n"...)
}

// Deliver ingests steps; it lets the daemon drain orphaned outboxes into
// its own store (capture.Deliverer).
func (t *TraceStore) Deliver(ctx context.Context, steps []hindsight.Step) error {
	_, err := t.Ingest(ctx, steps)
	return err
}

// DeliverRaw is Deliver for steps each encoded as JSON (of a
// hindsight.Step), as an outbox stores them (capture.RawDeliverer): they
// are stored as they are.
func (t *TraceStore) DeliverRaw(ctx context.Context, steps []json.RawMessage) error {
	_, err := t.IngestRaw(ctx, steps)
	return err
}

// ValidateSteps reports the first step a store cannot accept.
func ValidateSteps(steps []hindsight.Step) error {
	for i := range steps {
		if err := validateStep(i, steps[i].Source); err != nil {
			return err
		}
	}
	return nil
}

func validateStep(i int, source string) error {
	if source == "" {
		return fmt.Errorf("step %d: no source", i)
	}
	if !validID(source) {
		return fmt.Errorf("step %d: source %q is not a valid id", i, source)
	}
	return nil
}

func validateRaw(steps []wire.Raw) error {
	for i := range steps {
		if err := validateStep(i, steps[i].Source); err != nil {
			return err
		}
	}
	return nil
}

// validID accepts ids that fit the key layout.
func validID(s string) bool {
	return s != "" && len(s) <= 256 && !strings.ContainsAny(s, "\x00/")
}

// Ingest stores steps, assigning each a task and a step index. Steps seen
// before (same Source and Seq) are skipped, so a batch delivered again is
// stored once. A batch is stored in one transaction, or, when too large
// for one, in consecutive parts; a failure leaves whole parts stored, and
// a redelivery completes the batch.
func (t *TraceStore) Ingest(ctx context.Context, steps []hindsight.Step) (IngestResult, error) {
	if err := ValidateSteps(steps); err != nil {
		return IngestResult{}, fmt.Errorf("validate steps: %w: %w", ErrRejected, err)
	}
	raws, err := wire.EncodeSteps(steps)
	if err != nil {
		return IngestResult{}, fmt.Errorf("validate steps: %w: %w", ErrRejected, err)
	}
	return t.ingestRaw(ctx, raws)
}

// IngestRaw is Ingest for steps each encoded as JSON (of a
// hindsight.Step). What decodes is stored as it was encoded; a step that
// does not decode is refused with an error wrapping ErrRejected.
func (t *TraceStore) IngestRaw(ctx context.Context, steps []json.RawMessage) (IngestResult, error) {
	raws, err := wire.DecodeRaws(steps)
	if err != nil {
		return IngestResult{}, fmt.Errorf("decode steps: %w: %w", ErrRejected, err)
	}
	if err := validateRaw(raws); err != nil {
		return IngestResult{}, fmt.Errorf("validate steps: %w: %w", ErrRejected, err)
	}
	return t.ingestRaw(ctx, raws)
}

// ingestRaw is Ingest for validated steps.
func (t *TraceStore) ingestRaw(ctx context.Context, steps []wire.Raw) (IngestResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ingest(ctx, steps)
}

// ingest stores steps in one transaction, or halves them when they do not
// fit in one. t.mu is held.
func (t *TraceStore) ingest(ctx context.Context, steps []wire.Raw) (IngestResult, error) {
	res, err := t.ingestOnce(ctx, steps)
	if !errors.Is(err, badger.ErrTxnTooBig) || len(steps) < 2 {
		return res, err
	}
	h := len(steps) / 2
	a, err := t.ingest(ctx, steps[:h])
	if err != nil {
		return a, err
	}
	b, err := t.ingest(ctx, steps[h:])
	return IngestResult{Accepted: a.Accepted + b.Accepted, Duplicates: a.Duplicates + b.Duplicates}, err
}

func (t *TraceStore) ingestOnce(ctx context.Context, steps []wire.Raw) (IngestResult, error) {
	var res IngestResult
	w := t.newIngestTxn()
	defer w.txn.Discard()
	for i := range steps {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return IngestResult{}, err
			}
		}
		s := &steps[i]
		dup, err := w.add(s)
		if err != nil {
			return IngestResult{}, fmt.Errorf("ingest step %s/%d: %w", s.Source, s.Seq, err)
		}
		if dup {
			res.Duplicates++
		} else {
			res.Accepted++
		}
	}
	if err := w.commit(); err != nil {
		return IngestResult{}, fmt.Errorf("commit steps: %w", err)
	}
	return res, nil
}

// ingestTxn is one write transaction of Ingest, with what it read and
// wrote cached until commit: task records, high-water marks and session
// closes are written once per transaction, not once per step.
type ingestTxn struct {
	t      *TraceStore
	txn    *badger.Txn
	recs   map[string]*taskRec
	latest map[string]*taskRec    // group → its latest task, as far as this transaction knows
	hw     map[string]highWater   // high-water marks this transaction raised
	closes map[string]*closeState // session → its close record, as far as this transaction knows
	runs   map[string][]seqRun    // source → runs this transaction writes
	known  map[string][]seqRun    // source → stored runs it read
	now    time.Time

	// The group of the previous step, and what it was derived from:
	// consecutive steps of one sidecar share it.
	groupOf  groupInputs
	group    string
	explicit bool

	keys []byte // the keys written, carved out of shared chunks

	chunks map[string]*stepChunk // task id → the steps to write under one key
}

// newIngestTxn starts an ingest transaction; t.mu is held. Its maps and
// key buffer are those of the previous one, emptied: a batch of an agent's
// few steps costs no more than its writes.
func (t *TraceStore) newIngestTxn() *ingestTxn {
	w := t.scratch
	if w == nil || len(w.recs)+len(w.hw)+len(w.closes)+len(w.runs) > maxReusedEntries {
		w = &ingestTxn{
			recs: map[string]*taskRec{}, latest: map[string]*taskRec{},
			hw: map[string]highWater{}, closes: map[string]*closeState{}, chunks: map[string]*stepChunk{},
			runs: map[string][]seqRun{}, known: map[string][]seqRun{},
		}
		t.scratch = w
	} else {
		// Nothing of the previous transaction is kept: its keys and
		// values were views of its request's body or of w.keys, which
		// Badger copied on commit or dropped on discard.
		clear(w.recs)
		clear(w.latest)
		clear(w.hw)
		clear(w.closes)
		clear(w.chunks)
		clear(w.runs)
		clear(w.known)
		w.groupOf, w.group, w.explicit = groupInputs{}, "", false
		w.keys = w.keys[:0]
	}
	w.t, w.txn, w.now = t, t.db.NewTransaction(true), t.now()
	return w
}

// maxReusedEntries bounds the entries an ingest transaction's maps held
// for them to be reused: a rare huge batch's maps are let go.
const maxReusedEntries = 256

// closeState is a session's close record as a transaction sees it.
type closeState struct {
	rec   closeRec
	found bool
	dirty bool
}

// alloc returns n bytes for a key or value that lives until commit.
func (w *ingestTxn) alloc(n int) []byte {
	if cap(w.keys)-len(w.keys) < n {
		w.keys = make([]byte, 0, max(1<<10, n))
	}
	b := w.keys[len(w.keys) : len(w.keys)+n : len(w.keys)+n]
	w.keys = w.keys[:len(w.keys)+n]
	return b[:0]
}

func (w *ingestTxn) commit() error {
	for id, c := range w.chunks {
		if err := w.flushChunk(id, c); err != nil {
			return err
		}
	}
	for id, rec := range w.recs {
		v, err := rec.appendJSON(w.alloc(512))
		if err != nil {
			return fmt.Errorf("encode task %s: %w", id, err)
		}
		if err := w.txn.Set(key(pTask, []byte(id)), v); err != nil {
			return err
		}
	}
	for src, h := range w.hw {
		if err := w.txn.Set(key(pHW, []byte(src)), u64(h.seq)); err != nil {
			return err
		}
	}
	for src, runs := range w.runs {
		for _, r := range runs {
			if err := w.txn.Set(runKey(src, r.first), u64(r.last)); err != nil {
				return err
			}
		}
	}
	for sid, c := range w.closes {
		if c.dirty {
			if err := setJSON(w.txn, key(pClosed, []byte(sid)), &c.rec); err != nil {
				return err
			}
		}
	}
	if err := w.txn.Commit(); err != nil {
		return err
	}
	w.t.dirty.Store(true)
	for sid, c := range w.closes {
		if c.dirty {
			w.t.cacheClose(sid, *c)
		}
	}
	for group, rec := range w.latest {
		if prev := w.t.latest[group]; prev != nil && prev.ID == rec.ID {
			prev.update(rec)
			continue
		}
		w.t.latest[strings.Clone(group)] = rec.clone()
	}
	for src, h := range w.hw {
		if _, known := w.t.hw[src]; !known {
			src = strings.Clone(src) // not a view of a request's body
		}
		w.t.hw[src] = h
	}
	return nil
}

// mark returns the source's high-water mark as this transaction sees
// it: raised by this transaction, cached, or read (and cached) from the
// store. Writes are serialized by t.mu, so the read is the committed value.
func (w *ingestTxn) mark(source string) (highWater, error) {
	if h, ok := w.hw[source]; ok {
		return h, nil
	}
	if h, ok := w.t.hw[source]; ok {
		return h, nil
	}
	var h highWater
	item, err := w.txn.Get(key(pHW, []byte(source)))
	switch {
	case err == nil:
		if err := item.Value(func(v []byte) error { h = highWater{seq: binary.BigEndian.Uint64(v), ok: true}; return nil }); err != nil {
			return highWater{}, err
		}
	case !errors.Is(err, badger.ErrKeyNotFound):
		return highWater{}, err
	}
	if h.ok {
		r, found, err := w.storedRun(source, h.seq)
		if err != nil {
			return highWater{}, err
		}
		if found && r.last == h.seq {
			h.run, h.runOK = r.first, true
		}
	}
	w.t.hw[strings.Clone(source)] = h
	return h, nil
}

func runKey(source string, first uint64) []byte {
	return key(pRun, []byte(source), u64(first))
}

// storedRun returns the stored run of source that starts last at or
// before seq.
func (w *ingestTxn) storedRun(source string, seq uint64) (r seqRun, found bool, err error) {
	prefix := key(pRun, []byte(source), nil)
	it := keyIterator(w.txn, prefix, true)
	defer it.Close()
	it.Seek(append(runKey(source, seq), 0xff))
	if !it.ValidForPrefix(prefix) {
		return seqRun{}, false, nil
	}
	item := it.Item()
	k := item.Key()
	err = item.Value(func(v []byte) error {
		if len(v) != 8 || len(k) != len(prefix)+8 {
			return fmt.Errorf("run key %q: bad value %x", k, v)
		}
		r = seqRun{first: binary.BigEndian.Uint64(k[len(prefix):]), last: binary.BigEndian.Uint64(v)}
		return nil
	})
	return r, err == nil, err
}

// seen reports whether seq of source, at or below its high-water mark,
// was ingested: by this transaction, in a stored run, or (in a store
// from before runs) under its seq key.
func (w *ingestTxn) seen(source string, seq uint64) (bool, error) {
	for _, runs := range [2][]seqRun{w.runs[source], w.known[source]} {
		for _, r := range runs {
			if r.first <= seq && seq <= r.last {
				return true, nil
			}
		}
	}
	r, found, err := w.storedRun(source, seq)
	if err != nil {
		return false, err
	}
	if found && seq <= r.last {
		// The steps of a redelivery that follow are likely in it too.
		w.known[source] = append(w.known[source], r)
		return true, nil
	}
	sk := append(append(append(w.alloc(len(pSeq)+len(source)+9), pSeq...), source...), 0)
	sk = binary.BigEndian.AppendUint64(sk, seq)
	switch _, err := w.txn.Get(sk); {
	case err == nil:
		return true, nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	default:
		return false, err
	}
}

func (w *ingestTxn) rec(id string) (*taskRec, error) {
	if r := w.recs[id]; r != nil {
		return r, nil
	}
	var r taskRec
	if err := getJSON(w.txn, key(pTask, []byte(id)), &r); err != nil {
		return nil, err
	}
	w.recs[id] = &r
	return &r, nil
}

// closeOf returns the close record of session id as this transaction
// sees it.
func (w *ingestTxn) closeOf(id string) (*closeState, error) {
	if c := w.closes[id]; c != nil {
		return c, nil
	}
	if c, ok := w.t.closes[id]; ok {
		w.closes[id] = &c // a copy: the cache changes only on commit
		return &c, nil
	}
	c := &closeState{}
	switch err := getJSON(w.txn, key(pClosed, []byte(id)), &c.rec); {
	case err == nil:
		c.found = true
	case !errors.Is(err, badger.ErrKeyNotFound):
		return nil, err
	}
	w.closes[id] = c
	w.t.cacheClose(id, *c) // what the store holds, committed or not
	return c, nil
}

// add stores one step. It reports true for a step stored before.
func (w *ingestTxn) add(s *wire.Raw) (dup bool, err error) {
	hw, err := w.mark(s.Source)
	if err != nil {
		return false, err
	}
	// Above the high-water mark a step is new; at or below it (a
	// redelivery, or steps out of order) the runs of seqs say.
	if hw.ok && s.Seq <= hw.seq {
		if seen, err := w.seen(s.Source, s.Seq); seen || err != nil {
			return seen, err
		}
	}
	rec, err := w.segment(&s.Meta)
	if err != nil {
		return false, err
	}
	idx := rec.StepCount
	// The step is stored as delivered: its key names its task and index.
	if err := w.putStep(rec.ID, idx, s); err != nil {
		return false, err
	}
	if err := w.noteSeq(&s.Meta, hw); err != nil {
		return false, err
	}
	return false, w.account(rec, &s.Meta)
}

// stepChunk is steps of one task with consecutive indices, to be written
// under one key: Badger's cost is mostly per key. Steps that were next to
// each other in a request's body are a slice of it; others are copied.
type stepChunk struct {
	first int // the index of the first step
	n     int // steps

	src        []byte // the body the steps are in, or nil
	start, end int    // their span in src
	buf        []byte // the steps, comma-separated, when not a span
}

// maxChunk bounds the steps written under one key (Badger refuses values
// near its value log's file size). Badger encodes each value into a
// buffer it grows anew for every write, so a batch of large chunks costs
// it more than the same bytes in chunks of this size.
const maxChunk = 64 << 10

// value returns what c stores.
func (c *stepChunk) value() []byte {
	if c.buf != nil {
		return c.buf
	}
	return c.src[c.start:c.end:c.end]
}

// putStep adds s, the step of task id with index idx, to what the
// transaction writes.
func (w *ingestTxn) putStep(id string, idx int, s *wire.Raw) error {
	c := w.chunks[id]
	if c != nil && (c.first+c.n != idx || len(c.value())+len(s.JSON) > maxChunk) {
		if err := w.flushChunk(id, c); err != nil {
			return err
		}
		c = nil
	}
	switch {
	case c == nil:
		c = &stepChunk{first: idx, src: s.Src, start: s.Off, end: s.Off + len(s.JSON)}
		if s.Src == nil {
			c.src, c.start, c.end = s.JSON, 0, len(s.JSON)
		}
		w.chunks[id] = c
	case c.buf == nil && s.Src != nil && unsafe.SliceData(c.src) == unsafe.SliceData(s.Src) && separator(c.src, c.end, s.Off):
		c.end = s.Off + len(s.JSON) // next in the body
	default:
		if c.buf == nil {
			v := c.value()
			c.buf = append(make([]byte, 0, 2*(len(v)+len(s.JSON))), v...)
		}
		c.buf = append(append(c.buf, ','), s.JSON...)
	}
	c.n++
	return nil
}

// separator reports whether b[from:to] is a comma between blanks.
func separator(b []byte, from, to int) bool {
	if from > to || to > len(b) {
		return false
	}
	comma := false
	for _, c := range b[from:to] {
		switch {
		case c == ',' && !comma:
			comma = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			return false
		}
	}
	return comma
}

// flushChunk writes c, the chunk of task id.
func (w *ingestTxn) flushChunk(id string, c *stepChunk) error {
	delete(w.chunks, id)
	k := append(append(append(w.alloc(len(pStep)+len(id)+5), pStep...), id...), 0)
	k = binary.BigEndian.AppendUint32(k, uint32(c.first))
	return w.txn.Set(k, c.value())
}

// account adds s to its task's record.
func (w *ingestTxn) account(rec *taskRec, s *wire.Meta) error {
	rec.StepCount++
	if s.Failed {
		rec.FailureCount++
	}
	if s.Server != "" && !slices.Contains(rec.Servers, s.Server) {
		rec.Servers = append(rec.Servers, s.Server)
		sort.Strings(rec.Servers)
	}
	start, end := stepTimes(s, w.now)
	if rec.StartedAt.IsZero() || start.Before(rec.StartedAt) {
		rec.StartedAt = start
	}
	if end.After(rec.EndedAt) {
		rec.EndedAt = end
	}
	if end.After(rec.LastAt) {
		rec.LastAt = end
	}
	rec.IngestedAt = w.now
	if s.SessionID != "" {
		if rec.Sessions == nil {
			rec.Sessions = map[string]bool{}
		}
		if _, known := rec.Sessions[s.SessionID]; !known {
			c, err := w.closeOf(s.SessionID)
			if err != nil {
				return err
			}
			rec.Sessions[s.SessionID] = c.found && !c.rec.Pending
		}
	}
	if rec.Final {
		// A late step (an outbox drained after the task went final):
		// the task opens again and will be final, and reflected, anew.
		w.t.logger.Info("late step reopens a final task", "task", rec.ID, "source", s.Source, "seq", s.Seq)
		rec.Final = false
		rec.Reflection = ""
		if err := w.txn.Set(key(pOpen, []byte(rec.ID)), nil); err != nil {
			return err
		}
		if err := w.txn.Delete(key(pUnq, []byte(rec.ID))); err != nil {
			return err
		}
	}
	return nil
}

// noteSeq raises the source's high-water mark and applies a close that
// was waiting for this step. hw is the mark before s.
func (w *ingestTxn) noteSeq(s *wire.Meta, hw highWater) error {
	if hw.ok && s.Seq <= hw.seq {
		// A seq below the mark, missing until now: a run of its own.
		w.runs[s.Source] = append(w.runs[s.Source], seqRun{first: s.Seq, last: s.Seq})
		return nil
	}
	first := s.Seq
	if hw.runOK && s.Seq == hw.seq+1 {
		first = hw.run // the next seq: the run goes on
	}
	runs := w.runs[s.Source]
	i := len(runs) - 1
	for i >= 0 && runs[i].first != first {
		i--
	}
	if i >= 0 {
		runs[i].last = s.Seq
	} else {
		w.runs[s.Source] = append(runs, seqRun{first: first, last: s.Seq})
	}
	w.hw[s.Source] = highWater{seq: s.Seq, ok: true, run: first, runOK: true}
	if s.SessionID == "" {
		return nil
	}
	c, err := w.closeOf(s.SessionID)
	if err != nil || !c.found || !c.rec.Pending || c.rec.Source != s.Source || s.Seq < c.rec.LastSeq {
		return err
	}
	c.rec.Pending, c.dirty = false, true
	return nil
}

// stepTimes returns when a step started and ended, falling back on now for
// a step that carries no time.
func stepTimes(s *wire.Meta, now time.Time) (start, end time.Time) {
	start, end = s.StartedAt, s.EndedAt
	if start.IsZero() {
		start = end
	}
	if start.IsZero() {
		start = now
	}
	if end.Before(start) {
		end = start
	}
	return start, end
}

// groupInputs are what a step's segmentation group is derived from.
type groupInputs struct {
	explicitTask, transport, sessionID, source string
	hostPID                                    int
}

// groupOf names the segmentation group of a step: the explicit task, the
// agent host process of a stdio sidecar, the HTTP session, or, lacking
// all, the sidecar that sent it.
func groupOf(s *wire.Meta) (group string, explicit bool) {
	switch {
	case s.ExplicitTask != "" && validID(s.ExplicitTask):
		return "explicit:" + s.ExplicitTask, true
	case s.HostPID > 0 && (s.Transport == "" || s.Transport == "stdio"):
		return "host:" + strconv.Itoa(s.HostPID), false
	case s.SessionID != "":
		return "session:" + s.SessionID, false
	}
	return "source:" + s.Source, false
}

// segment finds or creates the task of s and returns its record.
func (w *ingestTxn) segment(s *wire.Meta) (*taskRec, error) {
	in := groupInputs{s.ExplicitTask, s.Transport, s.SessionID, s.Source, s.HostPID}
	if w.group == "" || in != w.groupOf {
		w.group, w.explicit = groupOf(s)
		w.groupOf = in
		if s.ExplicitTask != "" && !w.explicit {
			w.t.logger.Warn("ignoring an invalid explicit task id", "task", s.ExplicitTask, "source", s.Source)
		}
	}
	group, explicit := w.group, w.explicit
	start, _ := stepTimes(s, w.now)
	if explicit {
		rec, err := w.rec(s.ExplicitTask)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return nil, err
		}
		return w.create(s.ExplicitTask, group, start)
	}
	// Most steps continue the group's latest task: skip the index
	// lookups for them.
	rec := w.latest[group]
	if c := w.t.latest[group]; rec == nil && c != nil {
		if rec = w.recs[c.ID]; rec == nil {
			rec = c.copy()
			w.recs[rec.ID] = rec
		}
		w.latest[group] = rec
	}
	if rec != nil && !start.Before(rec.StartedAt) && !start.After(rec.LastAt.Add(w.t.gap)) && !endedBefore(rec, start) {
		return rec, nil
	}
	prev, next, err := w.neighbours(group, start)
	if err != nil {
		return nil, err
	}
	if prev != nil && !start.After(prev.LastAt.Add(w.t.gap)) && !endedBefore(prev, start) {
		if next == nil {
			w.latest[group] = prev
		}
		return prev, nil
	}
	if next != nil && !next.StartedAt.After(start.Add(w.t.gap)) {
		// An earlier step of a task already seen (out-of-order delivery
		// from another sidecar of the same host): move its start back.
		if err := w.txn.Delete(groupKey(group, next.StartedAt)); err != nil {
			return nil, err
		}
		if err := w.txn.Set(groupKey(group, start), []byte(next.ID)); err != nil {
			return nil, err
		}
		return next, nil
	}
	rec, err = w.create(newTaskID(start), group, start)
	if err == nil && next == nil {
		w.latest[group] = rec
	}
	return rec, err
}

// endedBefore reports whether the agent said rec was finished before a
// step that started at start: the step belongs to a new task.
func endedBefore(rec *taskRec, start time.Time) bool {
	return !rec.FinalAt.IsZero() && start.After(rec.FinalAt)
}

func groupKey(group string, start time.Time) []byte {
	return key(pGroup, []byte(group), u64(uint64(start.UnixNano())))
}

// neighbours returns the task of group that started last at or before t,
// and the one that started first after it.
func (w *ingestTxn) neighbours(group string, t time.Time) (prev, next *taskRec, err error) {
	prefix := key(pGroup, []byte(group), nil)
	at := groupKey(group, t)
	find := func(reverse bool) (*taskRec, error) {
		it := keyIterator(w.txn, prefix, reverse)
		defer it.Close()
		seek := at
		if reverse {
			seek = append(append([]byte(nil), at...), 0xff)
		} else {
			seek = key(pGroup, []byte(group), u64(uint64(t.UnixNano())+1))
		}
		it.Seek(seek)
		if !it.ValidForPrefix(prefix) {
			return nil, nil
		}
		id, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		return w.rec(string(id))
	}
	if prev, err = find(true); err != nil {
		return nil, nil, err
	}
	if next, err = find(false); err != nil {
		return nil, nil, err
	}
	return prev, next, nil
}

func (w *ingestTxn) create(id, group string, start time.Time) (*taskRec, error) {
	rec := &taskRec{Task: hindsight.Task{ID: id, StartedAt: start, Servers: []string{}}, Group: group}
	w.recs[id] = rec
	if err := w.txn.Set(groupKey(group, start), []byte(id)); err != nil {
		return nil, err
	}
	if err := w.txn.Set(key(pOpen, []byte(id)), nil); err != nil {
		return nil, err
	}
	return rec, nil
}

// newTaskID makes a task id that sorts by start time and reads as one:
// t-20261130-151627-3f9a1c.
func newTaskID(start time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "t-" + start.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

func getJSON(txn *badger.Txn, k []byte, v any) error {
	item, err := txn.Get(k)
	if err != nil {
		return err
	}
	return item.Value(func(b []byte) error { return json.Unmarshal(b, v) })
}

func setJSON(txn *badger.Txn, k []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return txn.Set(k, b)
}

// write runs fn in a read-write transaction and marks the store for the
// next sync.
func (t *TraceStore) write(fn func(txn *badger.Txn) error) error {
	err := t.db.Update(fn)
	t.dirty.Store(true)
	return err
}

// keyIterator iterates over the keys under prefix, in reverse when asked,
// without fetching values.
func keyIterator(txn *badger.Txn, prefix []byte, reverse bool) *badger.Iterator {
	opt := badger.DefaultIteratorOptions
	opt.PrefetchValues = false
	opt.Reverse = reverse
	opt.Prefix = prefix
	return txn.NewIterator(opt)
}
