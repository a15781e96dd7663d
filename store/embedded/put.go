package embedded

import (
	"context"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

// Put inserts or updates e (see hindsight.ExperienceStore). A missing id is
// generated; an empty namespace is the default one. When e has no vector it
// is embedded, unless its text is unchanged and the stored vector is still
// current. A vector of another embedder or dimension is refused with
// store.ErrDimension.
func (s *Store) Put(ctx context.Context, e *hindsight.Experience) error {
	if e.Namespace == "" {
		e.Namespace = hindsight.DefaultNamespace
	}
	if e.ID == "" {
		e.ID = newID()
	}
	if err := store.Validate(e); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	s.mu.RLock()
	emb, embID := s.emb, s.embID
	s.mu.RUnlock()
	var reuse []float32
	if len(e.Vector) == 0 && e.Version > 0 { // version 0 is a new experience
		var err error
		if reuse, err = s.reusable(e, embID, emb.Dim()); err != nil {
			return fmt.Errorf("put experience %q: %w", e.ID, err)
		}
	}

	vec := e.Vector
	switch {
	case len(vec) > 0:
		if (e.Embedder != "" && e.Embedder != embID) || len(vec) != emb.Dim() {
			return fmt.Errorf("put experience %q: vector of %q with %d dimensions, store uses %s: %w",
				e.ID, e.Embedder, len(vec), embID, store.ErrDimension)
		}
	case reuse != nil:
		vec = reuse
	default:
		vs, err := emb.Embed(ctx, []string{store.Text(e)})
		if err != nil {
			return fmt.Errorf("put experience %q: embed: %w", e.ID, err)
		}
		if len(vs) != 1 || len(vs[0]) != emb.Dim() {
			return fmt.Errorf("put experience %q: embedder returned a bad vector: %w", e.ID, store.ErrDimension)
		}
		vec = vs[0]
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.embID != embID {
		return fmt.Errorf("put experience %q: embedder changed during put: %w", e.ID, store.ErrDimension)
	}
	var old *hindsight.Experience // the index holds every stored experience
	slot, indexed := s.idx.get(e.Namespace, e.ID)
	if indexed {
		err := s.db.View(func(txn *badger.Txn) (err error) {
			old, err = readExp(txn, e.Namespace, e.ID)
			return err
		})
		if err != nil {
			return fmt.Errorf("put experience %q: %w", e.ID, err)
		}
	}
	n, enc, err := s.stamp(e, old, vec)
	if err != nil {
		return err
	}
	if err := s.write(n, enc); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	s.dirty.Add(1)
	s.indexPut(e, n, old, slot, reuse == nil)
	e.Vector = slices.Clone(vec)
	return nil
}

// stamp returns the record Put writes for e, given the stored version
// old (nil: none) and the vector vec: e with the next version, its dates,
// the store's embedder and vec as stored (storedVec), and vec's bytes in
// the store (encodeVec's). The caller holds s.mu.
func (s *Store) stamp(e, old *hindsight.Experience, vec []float32) (*hindsight.Experience, []byte, error) {
	now := s.now().UTC()
	n := cloneExp(e)
	var enc []byte
	n.Vector, enc = encodeStored(vec)
	n.Embedder = s.embID
	if old != nil {
		if old.Version != e.Version {
			return nil, nil, fmt.Errorf("put experience %q: stored version %d, given %d: %w", e.ID, old.Version, e.Version, hindsight.ErrConflict)
		}
		if n.CreatedAt.IsZero() {
			n.CreatedAt = old.CreatedAt
		}
	} else if n.CreatedAt.IsZero() {
		n.CreatedAt = now
	}
	n.Version = e.Version + 1
	n.UpdatedAt = now
	return n, enc, nil
}

// indexPut brings the index up to date with n, which Put wrote for e over
// old (nil: none; slot is its slot), and tells e its version, dates and
// embedder. A
// change of metadata alone keeps the slot (and its vector unless
// newVec). The caller holds s.mu.
func (s *Store) indexPut(e, n, old *hindsight.Experience, slot int32, newVec bool) {
	e.Version, e.CreatedAt, e.UpdatedAt, e.Embedder = n.Version, n.CreatedAt, n.UpdatedAt, n.Embedder
	if old != nil && sameIndexed(old, n) && s.idx.docs[slot].hasVec {
		if newVec {
			s.idx.setVector(slot, n.Vector)
		}
		s.idx.replaceMeta(slot, n)
	} else {
		s.idx.add(n, s.embID, nil)
	}
	if s.idx.needsCompact() {
		s.setIndex(s.idx.compact(false))
	}
}

// reusable returns the stored vector of e, scaled to unit length, when
// embID made it and e's text is unchanged; nil otherwise.
func (s *Store) reusable(e *hindsight.Experience, embID string, dim int) ([]float32, error) {
	var v []float32
	err := s.db.View(func(txn *badger.Txn) error {
		old, err := readExp(txn, e.Namespace, e.ID)
		if err != nil || old == nil || old.Embedder != embID || store.Text(old) != store.Text(e) {
			return err
		}
		if v, err = readVec(txn, e.Namespace, e.ID, nil); err != nil || len(v) != dim {
			v = nil
			return err
		}
		normalize(v)
		return nil
	})
	return v, err
}

// sameIndexed reports whether a and b have the same text and filter fields.
func sameIndexed(a, b *hindsight.Experience) bool {
	return a.Namespace == b.Namespace && a.Server == b.Server && a.Tool == b.Tool &&
		a.TaskType == b.TaskType && a.ErrorCode == b.ErrorCode && store.Text(a) == store.Text(b)
}

func cloneExp(e *hindsight.Experience) *hindsight.Experience {
	n := *e
	n.SourceSteps = slices.Clone(e.SourceSteps)
	if e.LastHitAt != nil {
		t := *e.LastHitAt
		n.LastHitAt = &t
	}
	n.Vector = nil
	return &n
}
