package replay

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// Overlay is an ExperienceStore that reads through to Base and keeps its
// writes to itself: a dry run of merging sees its own changes and leaves
// Base as it was. It follows the interface's contract (versions,
// ErrConflict). Search and RecordHits are not overlaid: Search asks Base,
// RecordHits does nothing.
type Overlay struct {
	Base hindsight.ExperienceStore

	mu     sync.Mutex
	writes map[string]hindsight.Experience // namespace + "/" + id
}

// NewOverlay returns an overlay over base.
func NewOverlay(base hindsight.ExperienceStore) *Overlay {
	return &Overlay{Base: base, writes: map[string]hindsight.Experience{}}
}

func (o *Overlay) Put(ctx context.Context, e *hindsight.Experience) error {
	cur, err := o.Get(ctx, e.Namespace, e.ID)
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now().UTC()
	switch {
	case err == nil:
		if cur.Version != e.Version {
			return hindsight.ErrConflict
		}
	case errors.Is(err, hindsight.ErrNotFound):
		e.CreatedAt = now
	default:
		return err
	}
	e.Version++
	e.UpdatedAt = now
	c := *e
	c.SourceSteps = append([]int(nil), e.SourceSteps...)
	o.writes[e.Namespace+"/"+e.ID] = c
	return nil
}

func (o *Overlay) Get(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	o.mu.Lock()
	e, ok := o.writes[namespace+"/"+id]
	o.mu.Unlock()
	if ok {
		return &e, nil
	}
	return o.Base.Get(ctx, namespace, id)
}

func (o *Overlay) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	return o.Base.Search(ctx, q)
}

func (o *Overlay) List(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	all := opt
	all.IncludeDeleted, all.IncludeSuperseded, all.Limit = true, true, 0
	base, err := o.Base.List(ctx, all)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := map[string]bool{}
	var out []hindsight.Experience
	keep := func(e hindsight.Experience) {
		if (opt.Namespace != "" && e.Namespace != opt.Namespace) || (opt.Tool != "" && e.Tool != opt.Tool) || (opt.Server != "" && e.Server != opt.Server) {
			return
		}
		if (e.SupersededBy != "" && !opt.IncludeSuperseded) || (e.Deleted && !opt.IncludeDeleted) {
			return
		}
		if opt.Limit == 0 || len(out) < opt.Limit {
			out = append(out, e)
		}
	}
	for _, e := range base {
		k := e.Namespace + "/" + e.ID
		seen[k] = true
		if w, ok := o.writes[k]; ok {
			e = w
		}
		keep(e)
	}
	var added []hindsight.Experience
	for k, w := range o.writes {
		if !seen[k] {
			added = append(added, w)
		}
	}
	sort.Slice(added, func(i, j int) bool { // in the order they were written
		if !added[i].CreatedAt.Equal(added[j].CreatedAt) {
			return added[i].CreatedAt.Before(added[j].CreatedAt)
		}
		return added[i].ID < added[j].ID
	})
	for _, w := range added {
		keep(w)
	}
	return out, nil
}

func (o *Overlay) RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error {
	return nil
}

// Close does nothing: Base is not the overlay's to close.
func (o *Overlay) Close() error { return nil }
