package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

// batchChunk is how many experiences PutBatch embeds in one call and
// indexes under one lock.
const batchChunk = 256

// PutBatch stores exps as Put stores each (ids generated, versions
// checked, hindsight.ErrConflict for a stale one), in order, in far fewer
// steps: the vectors of a chunk of them embedded in one call, written in
// as few Badger transactions as fit, indexed under one lock; a
// checkpoint follows when one is due (see checkpoint.go) unless a
// BeginBulk is under way. A vector is
// never reused: those without one are embedded, and unlike Put's their
// vector is not handed back (a large import would hold them all). An id
// may appear once.
// It returns how many of exps, from the first, were stored: a chunk that
// fails a check stores nothing, and an error writing leaves the
// experiences before it stored and indexed.
func (s *Store) PutBatch(ctx context.Context, exps []*hindsight.Experience) (int, error) {
	seen := make(map[string]bool, len(exps))
	for _, e := range exps {
		if e.Namespace == "" {
			e.Namespace = hindsight.DefaultNamespace
		}
		if e.ID == "" {
			e.ID = newID()
		}
		if err := store.Validate(e); err != nil {
			return 0, fmt.Errorf("put experience %q: %w", e.ID, err)
		}
		k := key(e.Namespace, e.ID)
		if seen[k] {
			return 0, fmt.Errorf("put experiences: %q is there twice", e.ID)
		}
		seen[k] = true
	}
	end := s.BeginBulk()
	defer end()
	done := 0
	for done < len(exps) {
		n, err := s.putChunk(ctx, exps[done:min(done+batchChunk, len(exps))])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// BeginBulk tells the store that many PutBatch calls follow (an import
// read in parts): until end is called (once), no checkpoint is taken,
// and the compactor of a store OpenDaemon opened holds its flattens back
// (badgerdb.Compactor.Hold); the last end takes a checkpoint when due,
// instead of one per call, and always when the bulk wrote without change
// keys (see putChunk). Bulks nest.
func (s *Store) BeginBulk() (end func()) {
	s.bulk.Add(1)
	release := func() {}
	if s.compactor != nil {
		release = s.compactor.Hold()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			release()
			if s.bulk.Add(-1) > 0 {
				return
			}
			// Writes from here on keep change keys; the snapshot covers
			// those before, and deletes the marker.
			s.mu.Lock()
			unmarked := s.unmarked
			s.unmarked = false
			s.mu.Unlock()
			if err := s.checkpoint(unmarked); err != nil {
				s.log.Warn("experience index snapshot not written; a start after a crash replays more", "err", err)
			}
		})
	}
}

// unmark deletes the bulk marker, once a snapshot covers the writes it
// stands for. The caller holds s.mu for writing.
func (s *Store) unmark() error {
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(bulkKey)) }); err != nil {
		return fmt.Errorf("delete the bulk marker: %w", err)
	}
	s.marked = false
	return nil
}

// putChunk embeds, writes and indexes part, and returns how many of it
// were stored. Within a bulk, once a checkpoint is due (the bulk's end
// takes one), it writes the bulk marker (bulkKey) with its first
// transaction and no change keys from then on: the end's snapshot covers
// those writes, and a start after a crash before it scans the tables
// instead. A large import so neither writes nor deletes two keys an
// experience.
func (s *Store) putChunk(ctx context.Context, part []*hindsight.Experience) (int, error) {
	s.mu.RLock()
	emb, embID := s.emb, s.embID
	s.mu.RUnlock()
	vecs := make([][]float32, len(part))
	var texts []string
	var need []int
	for i, e := range part {
		switch {
		case len(e.Vector) == 0:
			texts = append(texts, store.Text(e))
			need = append(need, i)
		case (e.Embedder != "" && e.Embedder != embID) || len(e.Vector) != emb.Dim():
			return 0, fmt.Errorf("put experience %q: vector of %q with %d dimensions, store uses %s: %w",
				e.ID, e.Embedder, len(e.Vector), embID, store.ErrDimension)
		default:
			vecs[i] = e.Vector
		}
	}
	if len(texts) > 0 {
		vs, err := emb.Embed(ctx, texts)
		if err != nil {
			return 0, fmt.Errorf("put experiences: embed: %w", err)
		}
		if len(vs) != len(texts) {
			return 0, fmt.Errorf("put experiences: embedder returned %d vectors for %d texts: %w", len(vs), len(texts), store.ErrDimension)
		}
		for j, i := range need {
			if len(vs[j]) != emb.Dim() {
				return 0, fmt.Errorf("put experience %q: embedder returned a bad vector: %w", part[i].ID, store.ErrDimension)
			}
			vecs[i] = vs[j]
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.embID != embID {
		return 0, fmt.Errorf("put experiences: embedder changed during put: %w", store.ErrDimension)
	}
	olds := make([]*hindsight.Experience, len(part))
	recs := make([]*hindsight.Experience, len(part))
	encs := make([][]byte, len(part))
	err := s.db.View(func(txn *badger.Txn) error {
		for i, e := range part {
			if _, indexed := s.idx.get(e.Namespace, e.ID); indexed {
				var err error
				if olds[i], err = readExp(txn, e.Namespace, e.ID); err != nil {
					return fmt.Errorf("put experience %q: %w", e.ID, err)
				}
			}
			n, enc, err := s.stamp(e, olds[i], vecs[i])
			if err != nil {
				return err
			}
			recs[i], encs[i] = n, enc
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	chg, mark := true, false
	switch {
	case s.unmarked:
		chg = false
	case s.bulk.Load() > 0 && s.snapPath != "" && s.checkpointDue(s.idx.live):
		chg, mark = false, true
	}
	stored := 0
	index := func(upto int) {
		if mark { // the marker is committed
			s.unmarked, s.marked, mark = true, true, false
			s.markGen++
		}
		for i := stored; i < upto; i++ {
			slot, _ := s.idx.get(part[i].Namespace, part[i].ID)
			s.indexPut(part[i], recs[i], olds[i], slot, true)
		}
		s.dirty.Add(int64(upto - stored))
		stored = upto
	}
	err = writeAll(s.db, recs, encs, chg, mark, index)
	return stored, err
}

// txnBudget is the bytes writeAll puts in one transaction: a tenth of
// the 8 MB memtable, below Badger's limit of 15%.
const txnBudget = 800 << 10

// writeAll writes recs and their vectors (encs[i]: recs[i]'s, encodeVec's),
// with their change keys when chg, and the bulk marker in the first
// transaction when mark, in as few transactions as fit, calling committed
// with the count written so far after each.
func writeAll(db *badger.DB, recs []*hindsight.Experience, encs [][]byte, chg, mark bool, committed func(upto int)) error {
	txn := db.NewTransaction(true)
	defer func() { txn.Discard() }()
	size := 0
	if mark {
		if err := txn.Set([]byte(bulkKey), nil); err != nil {
			return fmt.Errorf("put experiences: mark the bulk: %w", err)
		}
	}
	for i, e := range recs {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("put experience %q: %w", e.ID, err)
		}
		v := encs[i]
		if n := len(b) + len(v) + 128; size > 0 && size+n > txnBudget {
			if err := txn.Commit(); err != nil {
				return fmt.Errorf("put experiences: %w", err)
			}
			committed(i)
			txn, size = db.NewTransaction(true), 0
		}
		size += len(b) + len(v) + 128 // four keys
		err = txn.Set(expKey(e.Namespace, e.ID), b)
		if err == nil {
			err = txn.Set(vecKey(e.Namespace, e.ID), v)
		}
		if err == nil && chg {
			err = setChanged(txn, e.Namespace, e.ID)
		}
		if err != nil {
			return fmt.Errorf("put experience %q: %w", e.ID, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("put experiences: %w", err)
	}
	committed(len(recs))
	return nil
}
