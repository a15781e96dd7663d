package weaviate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/filters"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/graphql"
	"github.com/weaviate/weaviate/entities/models"
)

// Import writes experiences in batches of 100 (one request each) for
// loading packs and benchmarks. A new one is written as given — id
// (generated when empty), version (1 when 0), timestamps (now when zero);
// missing vectors are embedded in batches. One whose id is stored already
// is written over it without a version check, as an import's delta made
// on the version it carries (the stored one when it carries none or a
// later one): its fields become the imported ones, except those an edit
// made on that version or since changed, however the two interleave; its
// counts, evidence tasks and hits stay the stored ones.
func (s *Store) Import(ctx context.Context, exps []*hindsight.Experience) error {
	if s.stale {
		return fmt.Errorf("import experiences: collection holds another embedder's vectors; re-embed first: %w", store.ErrDimension)
	}
	const batch = 100
	now := s.now().UTC()
	for i := 0; i < len(exps); i += batch {
		part := exps[i:min(i+batch, len(exps))]
		var texts []string
		var need []int
		for j, e := range part {
			if e.Namespace == "" {
				e.Namespace = hindsight.DefaultNamespace
			}
			if e.ID == "" {
				e.ID = uuid.NewString()
			}
			if err := store.Validate(e); err != nil {
				return fmt.Errorf("import experience %q: %w", e.ID, err)
			}
			if len(e.Vector) > 0 && (len(e.Vector) != s.emb.Dim() || (e.Embedder != "" && e.Embedder != s.embID)) {
				return fmt.Errorf("import experience %q: %w", e.ID, store.ErrDimension)
			}
			if len(e.Vector) == 0 {
				texts = append(texts, store.Text(e))
				need = append(need, j)
			}
			if _, err := s.hasTenant(ctx, e.Namespace, true); err != nil {
				return fmt.Errorf("import experiences: %w", err)
			}
		}
		if len(texts) > 0 {
			vs, err := s.emb.Embed(ctx, texts)
			if err != nil {
				return fmt.Errorf("import experiences: embed: %w", err)
			}
			for k, j := range need {
				part[j].Vector = vs[k]
			}
		}
		over, err := s.existing(ctx, part)
		if err != nil {
			return fmt.Errorf("import experiences: %w", err)
		}
		var objs []*models.Object
		for _, e := range part {
			if over[e] {
				if err := s.importOver(ctx, e); err != nil {
					return fmt.Errorf("import experiences: %w", err)
				}
				continue
			}
			if e.Version == 0 {
				e.Version = 1
			}
			if e.CreatedAt.IsZero() {
				e.CreatedAt = now
			}
			if e.UpdatedAt.IsZero() {
				e.UpdatedAt = now
			}
			e.Embedder = s.embID
			vec := e.Vector
			e.Vector = nil
			obj, err := s.object(e, e, uuid.NewString(), vec)
			e.Vector = vec
			if err != nil {
				return fmt.Errorf("import experience %q: %w", e.ID, err)
			}
			objs = append(objs, obj)
		}
		if len(objs) == 0 {
			continue
		}
		if err := s.writeView(ctx, objs...); err != nil {
			return fmt.Errorf("import experiences: %w", err)
		}
	}
	return nil
}

// existing returns which of exps are stored already (one query per
// namespace).
func (s *Store) existing(ctx context.Context, exps []*hindsight.Experience) (map[*hindsight.Experience]bool, error) {
	byNS := map[string][]*hindsight.Experience{}
	for _, e := range exps {
		byNS[e.Namespace] = append(byNS[e.Namespace], e)
	}
	out := map[*hindsight.Experience]bool{}
	for ns, list := range byNS {
		ids := make([]string, len(list))
		for i, e := range list {
			ids[i] = e.ID
		}
		get := s.c.GraphQL().Get().WithClassName(s.class).WithTenant(Tenant(ns)).WithLimit(len(ids)).
			WithWhere(filters.Where().WithPath([]string{"hid"}).WithOperator(filters.ContainsAny).WithValueText(ids...)).
			WithFields(graphql.Field{Name: "hid"})
		if s.repl.cl != "" {
			get = get.WithConsistencyLevel(s.repl.cl)
		}
		resp, err := s.query(ctx, get)
		if err != nil {
			return nil, fmt.Errorf("find stored experiences: %w", err)
		}
		data, _ := resp.Data["Get"].(map[string]any)
		rows, _ := data[s.class].([]any)
		have := map[string]bool{}
		for _, r := range rows {
			if m, ok := r.(map[string]any); ok {
				id, _ := m["hid"].(string)
				have[id] = true
			}
		}
		for _, e := range list {
			out[e] = have[e.ID]
		}
	}
	return out, nil
}

// importOver writes e over the stored experience of its id (see Import).
func (s *Store) importOver(ctx context.Context, e *hindsight.Experience) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.state(ctx, e.Namespace, e.ID)
	if err != nil {
		return fmt.Errorf("import experience %q: %w", e.ID, err)
	}
	if cur == nil { // purged meanwhile
		return s.create(ctx, e)
	}
	base := cur.exp.Version
	if e.Version > 0 && e.Version < base {
		base = e.Version
	}
	e.EvidenceCount, e.CounterCount = cur.exp.EvidenceCount, cur.exp.CounterCount
	e.EvidenceTasks = slices.Clone(cur.exp.EvidenceTasks)
	return s.update(ctx, e, cur, base, true, "")
}

// NeedsReembed returns how many experiences hold vectors of another
// embedder than the configured one (all of them, or none: a collection
// has one embedder).
func (s *Store) NeedsReembed() int {
	if !s.stale {
		return 0
	}
	all, err := s.List(context.Background(), hindsight.ListOptions{IncludeSuperseded: true, IncludeDeleted: true})
	if err != nil {
		return 1
	}
	return len(all)
}

// Reembed rebuilds the collection with emb's vectors: it reads every
// experience, embeds them (progress is called after each batch), drops the
// collection, creates it again for emb and writes them back, each with the
// base and epoch it had, so its deltas (the delta collection is kept),
// those written meanwhile too, still fold over it: an edit racing the
// re-embedding is kept (the view searches read shows it from the next
// write of the experience). A Weaviate collection's vector dimension
// cannot change in place. Meanwhile a copy of every experience is kept in
// a 0600 JSONL file in the temporary directory (logged); it is removed on
// success and names the way back (hindsight experiences import) if the
// process dies half way.
func (s *Store) Reembed(ctx context.Context, emb hindsight.Embedder, progress func(done, total int)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tenants, err := s.allTenants(ctx)
	if err != nil {
		return fmt.Errorf("re-embed experiences: %w", err)
	}
	var all []stored
	err = s.eachObject(ctx, tenants, func(o *models.Object) error {
		st, err := storedOf(o)
		all = append(all, st)
		return err
	})
	if err != nil {
		return fmt.Errorf("re-embed experiences: %w", err)
	}
	backup, err := os.CreateTemp("", "hindsight-reembed-*.jsonl")
	if err != nil {
		return fmt.Errorf("re-embed experiences: backup: %w", err)
	}
	enc := json.NewEncoder(backup)
	for i := range all {
		if err := enc.Encode(all[i].view); err != nil {
			backup.Close()
			return fmt.Errorf("re-embed experiences: backup: %w", err)
		}
	}
	if err := backup.Close(); err != nil {
		return fmt.Errorf("re-embed experiences: backup: %w", err)
	}
	s.log.Info("re-embedding weaviate collection; a copy of every experience is kept until done",
		"collection", s.class, "count", len(all), "backup", backup.Name())
	newID := store.EmbedderID(emb)
	vecs := make([][]float32, len(all))
	const batch = 64
	for i := 0; i < len(all); i += batch {
		part := all[i:min(i+batch, len(all))]
		texts := make([]string, len(part))
		for j := range part {
			texts[j] = store.Text(part[j].view)
		}
		vs, err := emb.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("re-embed experiences: %w", err)
		}
		for j := range part {
			if len(vs[j]) != emb.Dim() {
				return fmt.Errorf("re-embed experiences: %w", store.ErrDimension)
			}
			vecs[i+j] = vs[j]
		}
		if progress != nil {
			progress(i+len(part), len(all))
		}
	}
	if s.afterReembedRead != nil {
		s.afterReembedRead()
	}
	if err := s.retry(ctx, func() error { return s.c.Schema().ClassDeleter().WithClassName(s.class).Do(ctx) }); err != nil {
		return fmt.Errorf("re-embed experiences: drop collection: %w", err)
	}
	s.emb, s.embID, s.stale = emb, newID, false
	s.tenants.reset()
	if err := s.migrate(ctx); err != nil {
		return fmt.Errorf("re-embed experiences (backup in %s): %w", backup.Name(), err)
	}
	for i := 0; i < len(all); i += 100 {
		var objs []*models.Object
		for j := i; j < min(i+100, len(all)); j++ {
			st := all[j]
			if _, err := s.hasTenant(ctx, st.view.Namespace, true); err != nil {
				return fmt.Errorf("re-embed experiences (backup in %s): %w", backup.Name(), err)
			}
			st.view.Embedder, st.base.Embedder = newID, newID
			obj, err := s.object(st.view, st.base, st.epoch, vecs[j])
			if err != nil {
				return fmt.Errorf("re-embed experiences (backup in %s): %w", backup.Name(), err)
			}
			objs = append(objs, obj)
		}
		if err := s.writeView(ctx, objs...); err != nil {
			return fmt.Errorf("re-embed experiences (backup in %s): %w", backup.Name(), err)
		}
	}
	os.Remove(backup.Name())
	return nil
}
