package weaviate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-openapi/strfmt"
	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/hindsight-proxy/hindsight/store/tokenize"
	"github.com/weaviate/weaviate/entities/models"
)

// stored is an experience's own object as read: the view its last writer
// folded (with the object's vector), the base its deltas apply to and the
// base's epoch.
type stored struct {
	view  *hindsight.Experience
	base  *hindsight.Experience
	epoch string
}

// get reads an experience's object at the store's consistency level; a
// nil view without error when it does not exist. An object written before
// schema v3 has no base of its own: its view is its base, and its epoch is
// named after the write that stored it.
func (s *Store) get(ctx context.Context, ns, id string) (stored, error) {
	ok, err := s.hasTenant(ctx, ns, false)
	if err != nil || !ok {
		return stored{}, err
	}
	var objs []*models.Object
	err = s.retry(ctx, func() (err error) {
		g := s.c.Data().ObjectsGetter().WithClassName(s.class).WithID(objectID(ns, id)).
			WithTenant(Tenant(ns)).WithVector()
		if s.cl != "" {
			g = g.WithConsistencyLevel(s.cl)
		}
		objs, err = g.Do(ctx)
		if notFound(err) {
			objs, err = nil, nil
		}
		return err
	})
	if err != nil || len(objs) == 0 {
		return stored{}, err
	}
	view, err := decode(objs[0].Properties)
	if err != nil {
		return stored{}, err
	}
	view.Vector = objs[0].Vector
	props, _ := objs[0].Properties.(map[string]any)
	st := stored{view: view, base: view}
	st.epoch, _ = props["epoch"].(string)
	if doc, _ := props["basedoc"].(string); doc != "" {
		st.base = new(hindsight.Experience)
		if err := json.Unmarshal([]byte(doc), st.base); err != nil {
			return stored{}, fmt.Errorf("decode base: %w", err)
		}
	}
	if st.epoch == "" {
		tok, _ := props["writer"].(string)
		st.epoch = "v2:" + tok + ":" + strconv.Itoa(view.Version)
	}
	return st, nil
}

// state is an experience folded from its object and deltas.
type state struct {
	stored
	exp  *hindsight.Experience // the fold, without a vector
	oids []string              // the delta objects folded, sorted
	hs   []hits
}

// fingerprint identifies what st was folded from.
func (st *state) fingerprint() string {
	var b strings.Builder
	b.WriteString(st.epoch)
	for _, oid := range st.oids {
		b.WriteString("," + oid)
	}
	for _, h := range st.hs {
		fmt.Fprintf(&b, ";%s/%d/%d", h.Epoch, h.Count, h.Last)
	}
	return b.String()
}

// state reads and folds ns/id; nil without error when it does not exist.
func (s *Store) state(ctx context.Context, ns, id string) (*state, error) {
	o, err := s.get(ctx, ns, id)
	if err != nil || o.view == nil {
		return nil, err
	}
	if err := s.ensureDeltaTenant(ctx, ns); err != nil {
		return nil, err
	}
	oids, err := s.deltaIDs(ctx, ns, id)
	if err != nil {
		return nil, err
	}
	slices.Sort(oids)
	ds, hs, err := s.readDeltas(ctx, ns, oids)
	if err != nil {
		return nil, err
	}
	e, err := fold(o.base, o.epoch, ds, hs)
	if err != nil {
		return nil, err
	}
	e.Embedder = o.view.Embedder
	return &state{stored: o, exp: e, oids: oids, hs: hs}, nil
}

// vectorFor returns the vector of st's folded text and the embedder that
// made it: hint when it was made for that text, the object's when its text
// is the same (whatever embedder made it: a collection awaiting re-embedding
// keeps its vectors), else a new one.
func (s *Store) vectorFor(ctx context.Context, st *state, hintText string, hint []float32) ([]float32, string, error) {
	text := store.Text(st.exp)
	switch {
	case len(hint) == s.emb.Dim() && text == hintText:
		return hint, s.embID, nil
	case len(st.view.Vector) > 0 && text == store.Text(st.view):
		return st.view.Vector, st.view.Embedder, nil
	}
	vs, err := s.emb.Embed(ctx, []string{text})
	if err != nil {
		return nil, "", fmt.Errorf("embed: %w", err)
	}
	if len(vs) != 1 || len(vs[0]) != s.emb.Dim() {
		return nil, "", fmt.Errorf("embedder returned a bad vector: %w", store.ErrDimension)
	}
	return vs[0], s.embID, nil
}

// maxRefresh bounds how often one write folds and writes the view again
// because deltas kept arriving meanwhile.
const maxRefresh = 20

// refresh folds ns/id and writes its view, again until a fold after the
// write finds nothing new (see delta.go), and returns the last state (nil
// when the experience is gone).
func (s *Store) refresh(ctx context.Context, ns, id, hintText string, hint []float32) (*state, error) {
	written := ""
	var st *state
	for range maxRefresh {
		var err error
		if st, err = s.state(ctx, ns, id); err != nil || st == nil {
			return nil, err
		}
		if st.fingerprint() == written {
			return st, nil
		}
		vec, embedder, err := s.vectorFor(ctx, st, hintText, hint)
		if err != nil {
			return nil, err
		}
		st.exp.Embedder = embedder
		obj, err := s.object(st.exp, st.base, st.epoch, vec)
		if err != nil {
			return nil, err
		}
		if err := s.writeView(ctx, obj); err != nil {
			return nil, err
		}
		st.exp.Vector = vec
		written = st.fingerprint()
	}
	s.log.Warn("weaviate: the view of an experience is still changing; the next write folds it again", "namespace", ns, "id", id)
	return st, nil
}

func decode(props any) (*hindsight.Experience, error) {
	m, ok := props.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("unexpected properties %T", props)
	}
	doc, _ := m["doc"].(string)
	e := new(hindsight.Experience)
	if err := json.Unmarshal([]byte(doc), e); err != nil {
		return nil, fmt.Errorf("decode experience: %w", err)
	}
	return e, nil
}

// encode returns the properties of the object of view over base of epoch.
func encode(view, base *hindsight.Experience, epoch string) (map[string]any, error) {
	doc, err := json.Marshal(view)
	if err != nil {
		return nil, err
	}
	bdoc, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	e := view
	return map[string]any{
		"doc": string(doc), "terms": strings.Join(tokenize.IndexTerms(nil, store.Text(e)), " "),
		"hid": e.ID, "namespace": e.Namespace, "server": e.Server, "tool": e.Tool,
		"taskType": e.TaskType, "errorCode": e.ErrorCode,
		"superseded": e.SupersededBy != "", "deleted": e.Deleted,
		"lastActive": rank.LastActive(e).Unix(), "created": e.CreatedAt.UnixNano(),
		"version": e.Version, "basedoc": string(bdoc), "epoch": epoch,
	}, nil
}

// write upserts objects (one batch request, retried while transient) at
// the store's consistency level.
func (s *Store) write(ctx context.Context, objs ...*models.Object) error {
	return s.retry(ctx, func() error {
		b := s.c.Batch().ObjectsBatcher().WithObjects(objs...)
		if s.cl != "" {
			b = b.WithConsistencyLevel(s.cl)
		}
		res, err := b.Do(ctx)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Result != nil && r.Result.Errors != nil && len(r.Result.Errors.Error) > 0 {
				return fmt.Errorf("object %s: %s", r.ID, r.Result.Errors.Error[0].Message)
			}
		}
		return nil
	})
}

// writeView writes experiences' own objects, which Search reads. A
// replicated search asks one replica, so that a search right after a write
// finds it wherever it runs they are written at ALL first; while a node is
// down that fails at once and they are written at the store's level (the
// node catches up by asynchronous replication when it is back).
func (s *Store) writeView(ctx context.Context, objs ...*models.Object) error {
	if s.factor > 1 && s.cl != ConsistencyAll {
		b := s.c.Batch().ObjectsBatcher().WithObjects(objs...).WithConsistencyLevel(ConsistencyAll)
		if res, err := b.Do(ctx); err == nil && !slices.ContainsFunc(res, func(r models.ObjectsGetResponse) bool {
			return r.Result != nil && r.Result.Errors != nil && len(r.Result.Errors.Error) > 0
		}) {
			return nil
		}
	}
	return s.write(ctx, objs...)
}

// object is the Weaviate object of view (with vec) over base of epoch.
func (s *Store) object(view, base *hindsight.Experience, epoch string, vec []float32) (*models.Object, error) {
	v, b := *view, *base
	v.Vector, b.Vector = nil, nil
	props, err := encode(&v, &b, epoch)
	if err != nil {
		return nil, err
	}
	return &models.Object{Class: s.class, ID: strfmt.UUID(objectID(view.Namespace, view.ID)),
		Tenant: Tenant(view.Namespace), Properties: props, Vector: vec}, nil
}

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
	d, err := diff(cur.exp, e)
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	now := s.now().UTC()
	d.Epoch, d.At, d.Token = cur.epoch, now.UnixNano(), uuid.NewString()
	obj, err := s.deltaObject(e.Namespace, e.ID, d.Token, "edit", d)
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

// RecordHits adds a hit at at to each of ids in namespace: this store
// instance's hit counter of each (one object per experience and instance,
// written by no one else) is raised in one request, then each view is
// folded again.
func (s *Store) RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error {
	ns := rank.Namespace(namespace)
	s.mu.Lock()
	defer s.mu.Unlock()
	var objs []*models.Object
	var hit []string
	raised := map[string]hits{}
	for _, id := range ids {
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
		h.Count++
		h.Last = max(h.Last, at.UnixNano())
		obj, err := s.deltaObject(ns, id, oid, "hits", h)
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
