package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/erase"
)

// Purge is the answer to a secret that escaped redaction: it removes data
// for good, not by soft delete, and compacts Badger so that the bytes
// leave the disk (see package erase).

// PurgeTasks removes the tasks ids and everything stored for them: their
// records, steps, group index entries and finality markers, every version
// of them erased from the files. Unknown ids are ignored; it returns the
// ids removed. (The dedupe records of the steps' sources stay: they hold
// sequence numbers, not content.)
func (t *TraceStore) PurgeTasks(ctx context.Context, ids []string) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.latest)
	var exact, prefixes [][]byte
	var removed []string
	err := t.db.View(func(txn *badger.Txn) error {
		for _, id := range ids {
			if !validID(id) {
				continue
			}
			var rec taskRec
			if err := getJSON(txn, key(pTask, []byte(id)), &rec); errors.Is(err, badger.ErrKeyNotFound) {
				continue
			} else if err != nil {
				return err
			}
			removed = append(removed, id)
			exact = append(exact, key(pTask, []byte(id)), key(pOpen, []byte(id)), key(pUnq, []byte(id)))
			prefixes = append(prefixes, key(pStep, []byte(id), nil))
			// The group index: every entry of the task's group naming it.
			gp := key(pGroup, []byte(rec.Group), nil)
			opt := badger.DefaultIteratorOptions
			opt.Prefix = gp
			it := txn.NewIterator(opt)
			for it.Rewind(); it.Valid(); it.Next() {
				var hit bool
				if err := it.Item().Value(func(v []byte) error { hit = bytes.Equal(v, []byte(id)); return nil }); err != nil {
					it.Close()
					return err
				}
				if hit {
					exact = append(exact, it.Item().KeyCopy(nil))
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	if len(removed) == 0 {
		return nil, nil
	}
	if err := erase.Keys(t.db, exact, prefixes); err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	t.dirty.Store(true)
	return removed, ctx.Err()
}

// TasksBefore returns the ids of the tasks whose last step is before
// cutoff, final or not.
func (t *TraceStore) TasksBefore(ctx context.Context, cutoff time.Time) ([]string, error) {
	var ids []string
	err := t.db.View(func(txn *badger.Txn) error {
		return eachTask(txn, func(rec *taskRec) {
			last := rec.LastAt
			if last.IsZero() {
				last = rec.EndedAt
			}
			if last.Before(cutoff) {
				ids = append(ids, rec.ID)
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	return ids, ctx.Err()
}

// PurgeTasksRequest is the body of POST /v1/tasks/purge: tasks by id, and
// those whose last step is before Before.
type PurgeTasksRequest struct {
	IDs    []string   `json:"ids,omitempty"`
	Before *time.Time `json:"before,omitempty"`
}

// PurgeResult says what a purge removed. Derived lists the experiences
// learnt from purged tasks (by source_task), which a purge of traces does
// not remove: purge them too if the secret may be in them.
type PurgeResult struct {
	Purged  []string `json:"purged"`
	Derived []string `json:"derived,omitempty"`
}

func (s *Server) handlePurgeTasks(w http.ResponseWriter, r *http.Request) {
	var req PurgeTasksRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	ids := req.IDs
	if req.Before != nil {
		old, err := s.Traces.TasksBefore(r.Context(), *req.Before)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		ids = append(ids, old...)
	}
	removed, err := s.Traces.PurgeTasks(r.Context(), ids)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res := PurgeResult{Purged: removed}
	if res.Purged == nil {
		res.Purged = []string{}
	}
	if st := s.Store; st != nil && len(removed) > 0 {
		gone := make(map[string]bool, len(removed))
		for _, id := range removed {
			gone[id] = true
		}
		if list, err := st.List(r.Context(), hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true}); err == nil {
			for _, e := range list {
				if gone[e.SourceTask] {
					res.Derived = append(res.Derived, e.ID)
				}
			}
		}
	}
	s.Logger.Info("tasks purged", "purged", len(removed))
	writeJSON(w, http.StatusOK, res)
}

// PurgeExperiencesRequest is the body of POST /v1/experiences/purge.
type PurgeExperiencesRequest struct {
	Namespace string   `json:"namespace,omitempty"` // "": each id where it is found
	IDs       []string `json:"ids"`
}

func (s *Server) handlePurgeExperiences(w http.ResponseWriter, r *http.Request) {
	var req PurgeExperiencesRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.storeWrite(w, r, StoreOp{Kind: OpPurge, Namespace: req.Namespace, IDs: req.IDs})
}

// PurgeTasks asks the daemon to remove tasks for good (see
// TraceStore.PurgeTasks).
func (c *Client) PurgeTasks(ctx context.Context, req PurgeTasksRequest) (PurgeResult, error) {
	var res PurgeResult
	err := c.call(ctx, http.MethodPost, "/tasks/purge", nil, req, &res)
	return res, err
}

// PurgeExperiences asks the daemon to remove experiences for good (see
// store.Purger).
func (c *Client) PurgeExperiences(ctx context.Context, namespace string, ids []string) (PurgeResult, error) {
	var res PurgeResult
	err := c.call(ctx, http.MethodPost, "/experiences/purge", nil, PurgeExperiencesRequest{Namespace: namespace, IDs: ids}, &res)
	return res, err
}
