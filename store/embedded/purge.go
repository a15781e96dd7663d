package embedded

import (
	"context"
	"fmt"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/erase"
	"github.com/hindsight-proxy/hindsight/store"
)

var _ store.Purger = (*Store)(nil)

// Purge removes the experiences ids of namespace for good: their records
// and vectors in Badger (every version, erased from the files; see package
// erase) and their entries in the in-memory indexes, which are rebuilt so
// that no term of theirs stays interned, and in the index snapshot, which
// is removed first and written again after. Unknown ids are ignored.
func (s *Store) Purge(_ context.Context, namespace string, ids []string) (int, error) {
	if namespace == "" {
		namespace = hindsight.DefaultNamespace
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	n, err := s.purge(namespace, ids)
	if n > 0 && err == nil {
		// Replay cannot see the erased keys: a new snapshot at once.
		if err := s.checkpointHeld(true); err != nil {
			s.log.Warn("experience index snapshot not written; the next start rebuilds the index", "err", err)
		}
	}
	return n, err
}

// purge is Purge for a caller that holds s.snapMu.
func (s *Store) purge(namespace string, ids []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys [][]byte
	var slots []int32
	for _, id := range ids {
		if slot, ok := s.idx.get(namespace, id); ok {
			slots = append(slots, slot)
			keys = append(keys, expKey(namespace, id), vecKey(namespace, id),
				chgExpKey(namespace, id), chgVecKey(namespace, id))
		}
	}
	if len(slots) == 0 {
		return 0, nil
	}
	if err := s.voidSnapshot(); err != nil {
		return 0, fmt.Errorf("purge experiences: %w", err)
	}
	if err := erase.Keys(s.db, keys, nil); err != nil {
		return 0, fmt.Errorf("purge experiences: %w", err)
	}
	for _, slot := range slots {
		s.idx.kill(slot)
	}
	for _, id := range ids {
		delete(s.idx.byKey, key(namespace, id))
	}
	s.setIndex(s.idx.compact(false))
	return len(slots), nil
}
