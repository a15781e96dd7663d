package memory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

// Written is what a write did: the experience as it is now (forget,
// restore, pin, edit), what a purge removed, or, when the store was
// unreachable or writes waited before it, the sequence number of the op
// queued in its place (Queued; nothing else is set).
type Written struct {
	Experience *hindsight.Experience
	Purged     *PurgeResult
	Queued     uint64
}

// PurgeResult says what a purge removed. Derived lists the experiences
// learnt from purged tasks (by source_task), which a purge of traces does
// not remove: purge them too if the secret may be in them.
type PurgeResult struct {
	Purged  []string `json:"purged"`
	Derived []string `json:"derived,omitempty"`
}

// Write applies op (Kind OpForget, OpRestore, OpPin, OpEdit or OpPurge;
// IDs, and Namespace "" for each id where it is found) at once, unless the
// store is unreachable or ops wait before it (order is kept): then op is
// queued in Ops and applied once the store is back. An edit applied at
// once must find the version its request read (else hindsight.ErrConflict);
// a queued one edits the version stored then.
func (s *Service) Write(ctx context.Context, op Op) (Written, error) {
	if op.Kind == OpEdit && op.Edit != nil {
		if err := validateEdit(op.Edit); err != nil {
			return Written{}, err
		}
	}
	if _, err := s.store(); err != nil {
		return Written{}, err
	}
	if s.Ops == nil || s.Ops.Depth() == 0 {
		res, err := s.apply(ctx, &op)
		if err == nil {
			return res, nil
		}
		if s.Ops == nil || !errors.Is(err, hindsight.ErrStoreUnavailable) {
			return Written{}, err
		}
	}
	seq, err := s.Ops.Enqueue(op)
	if err != nil {
		return Written{}, err
	}
	s.Logger.Info("experience store write queued", "op", seq, "kind", op.Kind, "ids", op.IDs)
	return Written{Queued: seq}, nil
}

// recordHits counts a hit on each of ids, through the queue when the
// store is unreachable or ops wait; a failure is logged and returned.
func (s *Service) recordHits(ctx context.Context, ns string, ids []string, at time.Time) error {
	op := Op{Kind: OpHits, Namespace: ns, IDs: ids, At: at}
	if s.Ops == nil || s.Ops.Depth() == 0 {
		_, err := s.apply(ctx, &op)
		if err == nil || s.Ops == nil || !errors.Is(err, hindsight.ErrStoreUnavailable) {
			if err != nil {
				s.Logger.Warn("record experience hits", "err", err)
			}
			return err
		}
	}
	if _, err := s.Ops.Enqueue(op); err != nil {
		s.Logger.Warn("record experience hits", "err", err)
		return err
	}
	return nil
}

// apply performs op against the store and returns what it did. An op from the queue (Seq set) edits the then-stored version;
// one applied at once must find the version its edit read.
func (s *Service) apply(ctx context.Context, op *Op) (Written, error) {
	st, err := s.store()
	if err != nil {
		return Written{}, err
	}
	if op.Kind == OpHits {
		if err := st.RecordHits(ctx, s.Resolve(op.Namespace), op.IDs, op.At); err != nil {
			return Written{}, fmt.Errorf("record hits: %w", err)
		}
		return Written{}, nil
	}
	if op.Kind == OpPurge {
		res, err := s.purge(ctx, st, op.Namespace, op.IDs)
		return Written{Purged: &res}, err
	}
	if len(op.IDs) != 1 {
		return Written{}, badRequest("%s: one id wanted, got %d", op.Kind, len(op.IDs))
	}
	for try := 0; ; try++ {
		e, err := s.find(ctx, st, op.Namespace, op.IDs[0])
		if err != nil {
			return Written{}, err
		}
		changed, err := change(e, op)
		if err != nil || !changed {
			return Written{Experience: e}, err
		}
		err = st.Put(ctx, e)
		if err == nil {
			s.Logger.Info("experience changed", "id", e.ID, "namespace", e.Namespace, "op", op.Kind, "version", e.Version)
			return Written{Experience: e}, nil
		}
		// Another write landed between the read and the put (another
		// request of this daemon, or another daemon): read again. A
		// forget, restore or pin applies to whatever version is stored;
		// an edit applied at once is checked again against the version
		// its caller read (change), a queued one is not.
		if !errors.Is(err, hindsight.ErrConflict) || try == 4 {
			return Written{}, fmt.Errorf("put experience: %w", err)
		}
	}
}

// change applies op to e and reports whether e changed.
func change(e *hindsight.Experience, op *Op) (bool, error) {
	switch op.Kind {
	case OpForget, OpRestore:
		want := op.Kind == OpForget
		changed := e.Deleted != want
		e.Deleted = want
		return changed, nil
	case OpPin:
		changed := e.Pinned != op.Pinned
		e.Pinned = op.Pinned
		return changed, nil
	case OpEdit:
		if op.Edit == nil {
			return false, badRequest("edit: no edit")
		}
		if op.Seq == 0 && e.Version != op.Edit.Version {
			return false, fmt.Errorf("edit experience %s: read version %d, stored %d: %w", e.ID, op.Edit.Version, e.Version, hindsight.ErrConflict)
		}
		return true, applyEdit(e, op.Edit)
	}
	return false, badRequest("unknown store op %q", op.Kind)
}

// purge erases ids for good, each in namespace ns or, when ns
// is "", where it is found.
func (s *Service) purge(ctx context.Context, st hindsight.ExperienceStore, ns string, ids []string) (PurgeResult, error) {
	res := PurgeResult{Purged: []string{}}
	p, ok := st.(store.Purger)
	if !ok {
		return res, fmt.Errorf("purge experiences: %w: the %s store cannot purge", ErrUnavailable, s.StoreName)
	}
	byNS := map[string][]string{}
	for _, id := range ids {
		e, err := s.find(ctx, st, ns, id)
		if errors.Is(err, hindsight.ErrNotFound) {
			continue
		}
		if err != nil {
			return res, err
		}
		byNS[e.Namespace] = append(byNS[e.Namespace], id)
	}
	for ns, ids := range byNS {
		if _, err := p.Purge(ctx, ns, ids); err != nil {
			return res, fmt.Errorf("purge experiences: %w", err)
		}
		res.Purged = append(res.Purged, ids...)
	}
	s.Logger.Info("experiences purged", "purged", len(res.Purged))
	return res, nil
}
