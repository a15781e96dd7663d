package weaviate

import (
	"context"
	"fmt"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

var _ store.Purger = (*Store)(nil)

// Purge deletes the experiences ids of namespace from the collection:
// their objects, deltas, vectors and inverted-index entries (Weaviate deletes
// them; its own files are compacted by the server on its schedule).
// Unknown ids are ignored.
func (s *Store) Purge(ctx context.Context, namespace string, ids []string) (int, error) {
	if namespace == "" {
		namespace = hindsight.DefaultNamespace
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, err := s.hasTenant(ctx, namespace, false)
	if err != nil || !ok {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		old, err := s.get(ctx, namespace, id)
		if err != nil {
			return n, fmt.Errorf("purge experience %q: %w", id, err)
		}
		if old.view == nil {
			continue
		}
		// Its deltas go first: a delta left over would hold the text.
		if err := s.dropDeltas(ctx, namespace, id); err != nil {
			return n, fmt.Errorf("purge experience %q: %w", id, err)
		}
		err = s.retry(ctx, func() error {
			d := s.c.Data().Deleter().WithClassName(s.class).WithID(objectID(namespace, id)).
				WithTenant(Tenant(namespace))
			if s.repl.cl != "" {
				d = d.WithConsistencyLevel(s.repl.cl)
			}
			if err := d.Do(ctx); err != nil && !notFound(err) {
				return err
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("purge experience %q: %w", id, err)
		}
		n++
	}
	return n, nil
}
