package traces

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/wire"
)

// ingestTxn is one write transaction of Ingest, with what it read and
// wrote cached until commit: task records, high-water marks and session
// closes are written once per transaction, not once per step.
type ingestTxn struct {
	t      *Store
	txn    *badger.Txn
	recs   map[string]*taskRec
	latest map[string]*taskRec    // group → its latest task, as far as this transaction knows
	hw     map[string]highWater   // high-water marks this transaction raised
	closes map[string]*closeState // session → its close record, as far as this transaction knows
	runs   map[string][]seqRun    // source → runs this transaction writes
	known  map[string][]seqRun    // source → stored runs it read
	now    time.Time
	closed int // sessions whose close waited for a step of this transaction

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
func (t *Store) newIngestTxn() *ingestTxn {
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
		w.closed = 0
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
		// Set through the pointer: assigning a map's entry anew stores
		// its key anew, here a view of a request's body.
		if p := w.t.hw[src]; p != nil {
			*p = h
		} else {
			w.t.hw[strings.Clone(src)] = &h
		}
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
	if h := w.t.hw[source]; h != nil {
		return *h, nil
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
	w.t.hw[strings.Clone(source)] = &h
	return h, nil
}

func runKey(source string, first uint64) []byte {
	return key(pRun, []byte(source), u64(first))
}

// storedRun returns the stored run of source that starts last at or
// before seq.
func (w *ingestTxn) storedRun(source string, seq uint64) (r seqRun, found bool, err error) {
	prefix := key(pRun, []byte(source), nil)
	it := badgerdb.KeyIterator(w.txn, prefix, true)
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
	w.closed++
	return nil
}
