package reflect

import (
	"context"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// memStore is a tiny in-memory ExperienceStore following the interface's
// contract (versions, ErrConflict), for tests of merging.
type memStore struct {
	mu   sync.Mutex
	exps map[string]hindsight.Experience // by namespace + "/" + id
	puts int
}

func newMemStore() *memStore { return &memStore{exps: map[string]hindsight.Experience{}} }

func (s *memStore) Put(ctx context.Context, e *hindsight.Experience) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := e.Namespace + "/" + e.ID
	now := time.Now().UTC()
	if old, ok := s.exps[key]; ok {
		if old.Version != e.Version {
			return hindsight.ErrConflict
		}
	} else {
		e.CreatedAt = now
	}
	e.Version++
	e.UpdatedAt = now
	c := *e
	c.SourceSteps = append([]int(nil), e.SourceSteps...)
	s.exps[key] = c
	s.puts++
	return nil
}

func (s *memStore) Get(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.exps[namespace+"/"+id]
	if !ok {
		return nil, hindsight.ErrNotFound
	}
	return &e, nil
}

func (s *memStore) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	return nil, nil
}

func (s *memStore) List(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []hindsight.Experience
	for _, e := range s.exps {
		if (opt.Namespace != "" && e.Namespace != opt.Namespace) || (opt.Tool != "" && e.Tool != opt.Tool) || (opt.Server != "" && e.Server != opt.Server) {
			continue
		}
		if (e.SupersededBy != "" && !opt.IncludeSuperseded) || (e.Deleted && !opt.IncludeDeleted) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *memStore) RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error {
	return nil
}

func (s *memStore) Close() error { return nil }

// all returns every experience, superseded ones included.
func (s *memStore) all() []hindsight.Experience {
	out, _ := s.List(context.Background(), hindsight.ListOptions{IncludeSuperseded: true, IncludeDeleted: true})
	return out
}
