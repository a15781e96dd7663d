package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// List returns the experiences opt selects that prov selects too (at most
// opt.Limit of those), with the hits waiting in memory added.
func (s *Service) List(ctx context.Context, opt hindsight.ListOptions, prov Provenance) ([]hindsight.Experience, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	limit := opt.Limit
	if !prov.Empty() {
		opt.Limit = 0 // the filter runs after the store's
	}
	list, err := st.List(ctx, opt)
	if err != nil {
		return nil, fmt.Errorf("list experiences: %w", err)
	}
	if !prov.Empty() {
		list = filterExperiences(list, prov, limit)
	}
	for i := range list {
		s.hits.overlay(&list[i])
	}
	return list, nil
}

// Search ranks the experiences for req's query in its namespace (the
// service's when it names none), keeps the best K (5 when 0) that req's
// provenance selects, with the server's pinned ones first when the query
// asks for them, and counts a hit on each unless the query says NoHit.
// Stored lessons whose text fails guard.CheckLesson are withheld and
// quarantined. It returns an empty list, not nil, when nothing matches.
func (s *Service) Search(ctx context.Context, req SearchRequest) ([]hindsight.ScoredExperience, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	q := req.Query
	q.Namespace = s.Resolve(q.Namespace)
	k := q.K
	if k <= 0 {
		k = 5
	}
	if !req.Provenance.Empty() {
		q.K = max(5*k, 50) // filtered after the store's ranking
	}
	// The service records the hits itself, once, whatever the backend
	// does on its own.
	noHit := q.NoHit
	q.NoHit = true
	res, err := st.Search(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
	}
	if q.IncludePinned && q.Server != "" {
		if res, err = s.withPinned(ctx, st, q, res); err != nil {
			return nil, err
		}
	}
	// What was stored before validation, or by another daemon sharing
	// the store, is checked again as it is read: a failing lesson is
	// quarantined, never told.
	res = s.screen(res)
	if !req.Provenance.Empty() {
		kept := res[:0]
		for i := range res {
			if req.Provenance.Match(&res[i].Experience) && len(kept) < k {
				kept = append(kept, res[i])
			}
		}
		res = kept
	}
	if !noHit && len(res) > 0 {
		ids := make([]string, len(res))
		for i := range res {
			ids[i] = res[i].ID
		}
		s.hits.add(q.Namespace, ids, time.Now()) // written in the background (hitQueue)
	}
	if res == nil {
		res = []hindsight.ScoredExperience{}
	}
	return res, nil
}

// withPinned puts q.Server's active pinned experiences first in res (see
// hindsight.Query.IncludePinned): those res holds keep their score, the
// others come with none.
func (s *Service) withPinned(ctx context.Context, st hindsight.ExperienceStore, q hindsight.Query, res []hindsight.ScoredExperience) ([]hindsight.ScoredExperience, error) {
	list, err := st.List(ctx, hindsight.ListOptions{Namespace: q.Namespace, Server: q.Server})
	if err != nil {
		return nil, fmt.Errorf("list pinned experiences: %w", err)
	}
	var pinned []hindsight.ScoredExperience
	ids := map[string]bool{}
	for _, e := range list {
		if e.Pinned && !e.Deleted && e.SupersededBy == "" && (q.Tool == "" || e.Tool == q.Tool) {
			pinned = append(pinned, hindsight.ScoredExperience{Experience: e})
			ids[e.ID] = true
		}
	}
	if len(pinned) == 0 {
		return res, nil
	}
	rest := make([]hindsight.ScoredExperience, 0, len(res))
	for _, e := range res {
		if ids[e.ID] {
			for i := range pinned {
				if pinned[i].ID == e.ID {
					pinned[i] = e
				}
			}
			continue
		}
		rest = append(rest, e)
	}
	return append(pinned, rest...), nil
}

// find returns the experience id: in the namespace asked for, else in the
// default one, else in any.
func (s *Service) find(ctx context.Context, st hindsight.ExperienceStore, ns, id string) (*hindsight.Experience, error) {
	e, err := st.Get(ctx, s.Resolve(ns), id)
	if err == nil || ns != "" || !errors.Is(err, hindsight.ErrNotFound) {
		return e, err
	}
	all, lerr := st.List(ctx, hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true})
	if lerr != nil {
		return nil, lerr
	}
	for i := range all {
		if all[i].ID == id {
			return st.Get(ctx, all[i].Namespace, id)
		}
	}
	return nil, fmt.Errorf("experience %s: %w", id, hindsight.ErrNotFound)
}

// Get returns experience id: in namespace ns when given, else in the
// default one, else in any; with the hits waiting in memory added.
func (s *Service) Get(ctx context.Context, ns, id string) (*hindsight.Experience, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	e, err := s.find(ctx, st, ns, id)
	if err != nil {
		return nil, err
	}
	s.hits.overlay(e)
	return e, nil
}

// LearntFrom returns the experiences opt lists whose source task is one of
// tasks, without their vectors: what reflection learnt from them.
func (s *Service) LearntFrom(ctx context.Context, opt hindsight.ListOptions, tasks ...string) ([]hindsight.Experience, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	all, err := st.List(ctx, opt)
	if err != nil {
		return nil, fmt.Errorf("list experiences: %w", err)
	}
	from := make(map[string]bool, len(tasks))
	for _, id := range tasks {
		from[id] = true
	}
	var out []hindsight.Experience
	for i := range all {
		if from[all[i].SourceTask] {
			all[i].Vector = nil
			out = append(out, all[i])
		}
	}
	return out, nil
}
