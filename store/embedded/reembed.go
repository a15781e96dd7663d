package embedded

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

// Reembed recomputes the vector of every experience with emb and makes emb
// the store's embedder. progress, if not nil, is called after each batch.
// Until it finishes, searches use the old vectors.
func (s *Store) Reembed(ctx context.Context, emb hindsight.Embedder, progress func(done, total int)) error {
	embID := store.EmbedderID(emb)
	var all []*hindsight.Experience
	err := s.db.View(func(txn *badger.Txn) (err error) {
		all, err = readAll(txn)
		return err
	})
	if err != nil {
		return fmt.Errorf("re-embed experiences: %w", err)
	}
	const batch = 64
	for i := 0; i < len(all); i += batch {
		part := all[i:min(i+batch, len(all))]
		texts := make([]string, len(part))
		for j, e := range part {
			texts[j] = store.Text(e)
		}
		vs, err := emb.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("re-embed experiences: %w", err)
		}
		if len(vs) != len(part) {
			return fmt.Errorf("re-embed experiences: embedder returned %d vectors for %d texts", len(vs), len(part))
		}
		err = s.db.Update(func(txn *badger.Txn) error {
			for j, e := range part {
				if len(vs[j]) != emb.Dim() {
					return store.ErrDimension
				}
				e.Embedder, e.Vector = embID, storedVec(vs[j])
				if err := setVector(txn, e.Namespace, e.ID, encodeVec(e.Vector)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("re-embed experiences: %w", err)
		}
		if progress != nil {
			progress(i+len(part), len(all))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.swapEmbedder(ctx, emb, all); err != nil {
		return fmt.Errorf("re-embed experiences: %w", err)
	}
	return nil
}

// swapEmbedder rewrites the records (embedder field) and swaps in a fresh
// index built from the current experiences and the new vectors of done.
// Experiences changed since done was read are re-embedded here. The
// caller holds s.mu.
func (s *Store) swapEmbedder(ctx context.Context, emb hindsight.Embedder, done []*hindsight.Experience) error {
	embID := store.EmbedderID(emb)
	vecs := make(map[string][]float32, len(done))
	texts := make(map[string]string, len(done))
	for _, e := range done {
		vecs[key(e.Namespace, e.ID)] = e.Vector
		texts[key(e.Namespace, e.ID)] = store.Text(e)
	}
	var cur []*hindsight.Experience
	err := s.db.View(func(txn *badger.Txn) (err error) {
		cur, err = readAll(txn)
		return err
	})
	if err != nil {
		return err
	}
	nx := newIndex(emb.Dim())
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, e := range cur {
		k := key(e.Namespace, e.ID)
		v := vecs[k]
		if v == nil || store.Text(e) != texts[k] {
			vs, err := emb.Embed(ctx, []string{store.Text(e)})
			if err != nil {
				return err
			}
			v = storedVec(vs[0])
			if err := wb.Set(vecKey(e.Namespace, e.ID), encodeVec(v)); err != nil {
				return err
			}
		}
		e.Embedder, e.Vector = embID, nil
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := wb.Set(expKey(e.Namespace, e.ID), b); err != nil {
			return err
		}
		e.Vector = v
		nx.add(e, embID, nil)
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	s.emb, s.embID = emb, embID
	s.setIndex(nx)
	s.covers.Store(0) // the snapshot on disk is of the old embedder
	s.dirty.Add(1)
	return nil
}
