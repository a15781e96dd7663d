package weaviate

// This file is an experience's own object: its base, epoch and view, and
// how a write folds and rewrites the view (see delta.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-openapi/strfmt"
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
	obj, err := s.getObject(ctx, s.class, ns, objectID(ns, id), true)
	if err != nil || obj == nil {
		return stored{}, err
	}
	return storedOf(obj)
}

// storedOf decodes an experience's object (see get).
func storedOf(obj *models.Object) (stored, error) {
	view, err := decode(obj.Properties)
	if err != nil {
		return stored{}, err
	}
	view.Vector = obj.Vector
	props, _ := obj.Properties.(map[string]any)
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
	oids, more, err := s.deltaIDs(ctx, ns, id)
	if err != nil {
		return nil, err
	}
	// Too many to fold, or more than Weaviate lists at once: compact
	// first (compact.go), then list again.
	for round := 0; more || len(oids) > compactAt; round++ {
		folded, cerr := s.compact(ctx, ns, id, o.epoch)
		if cerr != nil || !folded || round == maxCompactRounds {
			if more {
				return nil, fmt.Errorf("list deltas of %q: more than %d, compaction: %v", id, len(oids), cerr)
			}
			if cerr != nil {
				s.log.Warn("weaviate: compaction failed; folding every delta", "namespace", ns, "id", id, "err", cerr)
			}
			break
		}
		if oids, more, err = s.deltaIDs(ctx, ns, id); err != nil {
			return nil, err
		}
	}
	slices.Sort(oids)
	cps, ds, hs, err := s.readDeltas(ctx, ns, oids)
	if err != nil {
		return nil, err
	}
	e, err := fold(o.base, o.epoch, cps, ds, hs)
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
		if s.repl.cl != "" {
			b = b.WithConsistencyLevel(s.repl.cl)
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
	if s.repl.factor > 1 && s.repl.cl != ConsistencyAll {
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

// getObject reads one object of class in ns's tenant at the store's
// consistency level, retried while transient; nil without error when it
// does not exist (a "not found" is believed only from a ready server).
func (s *Store) getObject(ctx context.Context, class, ns, oid string, withVector bool) (*models.Object, error) {
	var objs []*models.Object
	err := s.retry(ctx, func() (err error) {
		g := s.c.Data().ObjectsGetter().WithClassName(class).WithID(oid).WithTenant(Tenant(ns))
		if withVector {
			g = g.WithVector()
		}
		if s.repl.cl != "" {
			g = g.WithConsistencyLevel(s.repl.cl)
		}
		objs, err = g.Do(ctx)
		if notFound(err) {
			objs, err = nil, s.notReady(ctx)
		}
		return err
	})
	if err != nil || len(objs) == 0 {
		return nil, err
	}
	return objs[0], nil
}
