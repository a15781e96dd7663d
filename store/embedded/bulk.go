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
// instead of one per call, and then a second, which deletes the bulk's
// change keys below its own version. Bulks nest.
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
			s.mu.RLock()
			due := s.checkpointDue(s.idx.live)
			s.mu.RUnlock()
			if err := s.checkpoint(false); err != nil {
				s.log.Warn("experience index snapshot not written; a start after a crash replays more", "err", err)
				return
			}
			// A second snapshot deletes the bulk's change keys, which the
			// first covers, below its own version: a replay then iterates
			// none of them.
			if due {
				if err := s.checkpoint(true); err != nil {
					s.log.Warn("experience index snapshot not written; a start after a crash replays more", "err", err)
				}
			}
		})
	}
}

// putChunk embeds, writes and indexes part, and returns how many of it
// were stored.
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
	err := s.db.View(func(txn *badger.Txn) error {
		for i, e := range part {
			if _, indexed := s.idx.get(e.Namespace, e.ID); indexed {
				var err error
				if olds[i], err = readExp(txn, e.Namespace, e.ID); err != nil {
					return fmt.Errorf("put experience %q: %w", e.ID, err)
				}
			}
			n, err := s.stamp(e, olds[i], vecs[i])
			if err != nil {
				return err
			}
			recs[i] = n
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	stored := 0
	index := func(upto int) {
		for i := stored; i < upto; i++ {
			slot, _ := s.idx.get(part[i].Namespace, part[i].ID)
			s.indexPut(part[i], recs[i], olds[i], slot, true)
		}
		s.dirty.Add(int64(upto - stored))
		stored = upto
	}
	err = writeAll(s.db, recs, index)
	return stored, err
}

// txnBudget is the bytes writeAll puts in one transaction: a tenth of
// the 8 MB memtable, below Badger's limit of 15%.
const txnBudget = 800 << 10

// writeAll writes recs (records and vectors) in as few transactions as
// fit, calling committed with the count written so far after each.
func writeAll(db *badger.DB, recs []*hindsight.Experience, committed func(upto int)) error {
	txn := db.NewTransaction(true)
	defer func() { txn.Discard() }()
	size := 0
	for i, e := range recs {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("put experience %q: %w", e.ID, err)
		}
		v := encodeVec(e.Vector)
		if n := len(b) + len(v) + 128; size > 0 && size+n > txnBudget {
			if err := txn.Commit(); err != nil {
				return fmt.Errorf("put experiences: %w", err)
			}
			committed(i)
			txn, size = db.NewTransaction(true), 0
		}
		size += len(b) + len(v) + 128 // four keys
		if err := setRecord(txn, e.Namespace, e.ID, b); err != nil {
			return fmt.Errorf("put experience %q: %w", e.ID, err)
		}
		if err := setVector(txn, e.Namespace, e.ID, v); err != nil {
			return fmt.Errorf("put experience %q: %w", e.ID, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("put experiences: %w", err)
	}
	committed(len(recs))
	return nil
}
