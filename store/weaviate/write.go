package weaviate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/weaviate/weaviate/entities/models"
)

// Get returns an experience in any state, with its vector: folded from
// its base and every delta the consistency level's replicas hold.
func (s *Store) Get(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	st, err := s.state(ctx, rank.Namespace(namespace), id)
	if err != nil {
		return nil, fmt.Errorf("get experience %q: %w", id, err)
	}
	if st == nil {
		return nil, fmt.Errorf("get experience %q: %w", id, hindsight.ErrNotFound)
	}
	if st.exp.Vector, st.exp.Embedder, err = s.vectorFor(ctx, st, "", nil); err != nil {
		return nil, fmt.Errorf("get experience %q: %w", id, err)
	}
	return st.exp, nil
}

// Put inserts or updates e (see hindsight.ExperienceStore and the embedded
// store, whose rules it follows).
//
// A new experience is written as its own base. An update reads the folded
// state, refuses a stale version (ErrConflict) and stores what e changes
// as a new delta (see delta.go), then writes the folded view. Two
// processes that update one experience at the same moment both succeed
// and both updates are kept: the version then counts both, evidence and
// counter counts add up, evidence tasks merge, and of two changes of one
// text field the later one shows (the other stays in its delta). e gets
// the version its own write made, so a caller that writes again without
// re-reading conflicts. Hits are recorded by RecordHits only.
func (s *Store) Put(ctx context.Context, e *hindsight.Experience) error {
	return s.put(ctx, e, "")
}

// PutOnce is Put, except that an update's delta is named by key: two
// processes that make the same change under one key at the same moment
// (two daemons merging one copy of a lesson) store one delta, so the
// evidence it adds counts once (see reflect.Sweeper).
func (s *Store) PutOnce(ctx context.Context, e *hindsight.Experience, key string) error {
	return s.put(ctx, e, key)
}

func (s *Store) put(ctx context.Context, e *hindsight.Experience, key string) error {
	if e.Namespace == "" {
		e.Namespace = hindsight.DefaultNamespace
	}
	if e.ID == "" {
		e.ID = uuid.NewString()
	}
	if err := store.Validate(e); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	if s.stale {
		return fmt.Errorf("put experience %q: collection holds another embedder's vectors; re-embed first: %w", e.ID, store.ErrDimension)
	}
	if len(e.Vector) > 0 && ((e.Embedder != "" && e.Embedder != s.embID) || len(e.Vector) != s.emb.Dim()) {
		return fmt.Errorf("put experience %q: vector of %q with %d dimensions, store uses %s: %w",
			e.ID, e.Embedder, len(e.Vector), s.embID, store.ErrDimension)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.hasTenant(ctx, e.Namespace, true); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	cur, err := s.state(ctx, e.Namespace, e.ID)
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	if cur == nil {
		return s.create(ctx, e)
	}
	if cur.exp.Version != e.Version {
		return fmt.Errorf("put experience %q: stored version %d, given %d: %w", e.ID, cur.exp.Version, e.Version, hindsight.ErrConflict)
	}
	return s.update(ctx, e, cur, cur.exp.Version, false, key)
}

// update stores what e changes of cur as a delta made on version base
// (weak for an import's, see delta; named by key when key is set, else
// by a random token), folds and writes the view, and gives e the version
// its write made.
func (s *Store) update(ctx context.Context, e *hindsight.Experience, cur *state, base int, weak bool, key string) error {
	d, err := diff(cur.exp, e)
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	now := s.now().UTC()
	token := uuid.NewString()
	if key != "" {
		token = uuid.NewSHA1(uuid.NameSpaceOID, []byte(e.Namespace+"\x00"+e.ID+"\x00"+key)).String()
	}
	d.Epoch, d.At, d.Token, d.Base, d.Weak = cur.epoch, now.UnixNano(), token, base, weak
	obj, err := s.deltaObject(e.Namespace, e.ID, d.Token, kindEdit, d)
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	if err := s.write(ctx, obj); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	st, err := s.refresh(ctx, e.Namespace, e.ID, store.Text(e), e.Vector)
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	e.Version, e.UpdatedAt, e.Embedder = cur.exp.Version+1, now, s.embID
	e.CreatedAt = cur.exp.CreatedAt
	if st != nil {
		e.HitCount, e.LastHitAt = st.exp.HitCount, st.exp.LastHitAt
		if store.Text(st.exp) == store.Text(e) {
			e.Vector = slices.Clone(st.exp.Vector)
		}
	}
	return nil
}

// create writes e as a new experience: version 1, its own base.
func (s *Store) create(ctx context.Context, e *hindsight.Experience) error {
	vec := e.Vector
	if len(vec) == 0 {
		vs, err := s.emb.Embed(ctx, []string{store.Text(e)})
		if err != nil {
			return fmt.Errorf("put experience %q: embed: %w", e.ID, err)
		}
		if len(vs) != 1 || len(vs[0]) != s.emb.Dim() {
			return fmt.Errorf("put experience %q: embedder returned a bad vector: %w", e.ID, store.ErrDimension)
		}
		vec = vs[0]
	}
	now := s.now().UTC()
	n := *e
	n.SourceSteps = slices.Clone(e.SourceSteps)
	if n.CreatedAt.IsZero() {
		n.CreatedAt = now
	}
	n.Version, n.UpdatedAt, n.Embedder = e.Version+1, now, s.embID
	obj, err := s.object(&n, &n, uuid.NewString(), vec)
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	if err := s.writeView(ctx, obj); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	e.Version, e.CreatedAt, e.UpdatedAt, e.Embedder = n.Version, n.CreatedAt, n.UpdatedAt, n.Embedder
	e.Vector = slices.Clone(vec)
	return nil
}

// RecordHits adds a hit at at to each of ids in namespace (an id listed
// twice gets two): this store instance's hit counter of each (one object
// per experience and instance, written by no one else) is raised in one
// request, then each view is folded again.
func (s *Store) RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error {
	ns := rank.Namespace(namespace)
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int{}
	var distinct []string
	for _, id := range ids {
		if counts[id] == 0 {
			distinct = append(distinct, id)
		}
		counts[id]++
	}
	var objs []*models.Object
	var hit []string
	raised := map[string]hits{}
	for _, id := range distinct {
		o, err := s.get(ctx, ns, id)
		if err != nil {
			return fmt.Errorf("record experience hits: %w", err)
		}
		if o.view == nil {
			continue
		}
		oid := s.hitsID(ns, id, o.epoch)
		h := s.hitc[oid]
		h.Epoch = o.epoch
		h.Count += counts[id]
		h.Last = max(h.Last, at.UnixNano())
		obj, err := s.deltaObject(ns, id, oid, kindHits, h)
		if err != nil {
			return fmt.Errorf("record experience hits: %w", err)
		}
		raised[oid] = h
		objs = append(objs, obj)
		hit = append(hit, id)
	}
	if len(objs) == 0 {
		return nil
	}
	if err := s.ensureDeltaTenant(ctx, ns); err != nil {
		return fmt.Errorf("record experience hits: %w", err)
	}
	if err := s.write(ctx, objs...); err != nil {
		return fmt.Errorf("record experience hits: %w", err)
	}
	for oid, h := range raised {
		s.hitc[oid] = h
	}
	for _, id := range hit {
		if _, err := s.refresh(ctx, ns, id, "", nil); err != nil {
			return fmt.Errorf("record experience hits: %w", err)
		}
	}
	return nil
}
