package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

// QueuedResult is the answer (202) to a write the daemon queued because
// the experience store was unreachable, or had writes waiting before it.
type QueuedResult struct {
	Queued bool   `json:"queued"`
	Op     uint64 `json:"op"`
}

// QueuedError is what Client methods return for a write the daemon queued
// (see QueuedResult): not a failure, but the write is not applied yet.
type QueuedError struct{ Op uint64 }

func (e *QueuedError) Error() string {
	return fmt.Sprintf("queued: the store is unreachable; applied when it is back (op %d)", e.Op)
}

// storeWrite applies op at once and answers what it returns, unless the
// store is unreachable or ops wait before it (order is kept): then op is
// queued and answered 202 with a QueuedResult.
func (s *Server) storeWrite(w http.ResponseWriter, r *http.Request, op StoreOp) {
	if _, err := s.store(); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.StoreOps == nil || s.StoreOps.Depth() == 0 {
		res, err := s.applyOp(r.Context(), &op)
		if err == nil {
			writeJSON(w, http.StatusOK, res)
			return
		}
		if s.StoreOps == nil || !errors.Is(err, hindsight.ErrStoreUnavailable) {
			s.fail(w, r, err)
			return
		}
	}
	seq, err := s.StoreOps.Enqueue(op)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.Logger.Info("experience store write queued", "op", seq, "kind", op.Kind, "ids", op.IDs)
	writeJSON(w, http.StatusAccepted, QueuedResult{Queued: true, Op: seq})
}

// recordHits counts a hit on each of ids, through the queue when the
// store is unreachable or ops wait; a failure is logged and returned.
func (s *Server) recordHits(ctx context.Context, ns string, ids []string, at time.Time) error {
	op := StoreOp{Kind: OpHits, Namespace: ns, IDs: ids, At: at}
	if s.StoreOps == nil || s.StoreOps.Depth() == 0 {
		_, err := s.applyOp(ctx, &op)
		if err == nil || s.StoreOps == nil || !errors.Is(err, hindsight.ErrStoreUnavailable) {
			if err != nil {
				s.Logger.Warn("record experience hits", "err", err)
			}
			return err
		}
	}
	if _, err := s.StoreOps.Enqueue(op); err != nil {
		s.Logger.Warn("record experience hits", "err", err)
		return err
	}
	return nil
}

// applyOp performs op against the store and returns what the API answers
// for it. An op from the queue (Seq set) edits the then-stored version;
// one applied at once must find the version its edit read.
func (s *Server) applyOp(ctx context.Context, op *StoreOp) (any, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	if op.Kind == OpHits {
		if err := st.RecordHits(ctx, s.namespace(op.Namespace), op.IDs, op.At); err != nil {
			return nil, fmt.Errorf("record hits: %w", err)
		}
		return nil, nil
	}
	if op.Kind == OpPurge {
		return s.purgeExperiences(ctx, st, op.Namespace, op.IDs)
	}
	if len(op.IDs) != 1 {
		return nil, badRequest("%s: one id wanted, got %d", op.Kind, len(op.IDs))
	}
	for try := 0; ; try++ {
		e, err := s.find(ctx, st, op.Namespace, op.IDs[0])
		if err != nil {
			return nil, err
		}
		changed, err := s.change(e, op)
		if err != nil || !changed {
			return e, err
		}
		err = st.Put(ctx, e)
		if err == nil {
			s.Logger.Info("experience changed", "id", e.ID, "namespace", e.Namespace, "op", op.Kind, "version", e.Version)
			return e, nil
		}
		// Another write landed between the read and the put (another
		// request of this daemon, or another daemon): read again. A
		// forget, restore or pin applies to whatever version is stored;
		// an edit applied at once is checked again against the version
		// its caller read (change), a queued one is not.
		if !errors.Is(err, hindsight.ErrConflict) || try == 4 {
			return nil, fmt.Errorf("put experience: %w", err)
		}
	}
}

// change applies op to e and reports whether e changed.
func (s *Server) change(e *hindsight.Experience, op *StoreOp) (bool, error) {
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

// purgeExperiences erases ids for good, each in namespace ns or, when ns
// is "", where it is found.
func (s *Server) purgeExperiences(ctx context.Context, st hindsight.ExperienceStore, ns string, ids []string) (PurgeResult, error) {
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
