package daemon

import (
	"context"
	"net/http"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/memory"
)

// Purge is the answer to a secret that escaped redaction: it removes data
// for good, not by soft delete, and compacts Badger so that the bytes
// leave the disk (see package erase).

// PurgeTasksRequest is the body of POST /v1/tasks/purge: tasks by id, and
// those whose last step is before Before.
type PurgeTasksRequest struct {
	IDs    []string   `json:"ids,omitempty"`
	Before *time.Time `json:"before,omitempty"`
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
	if s.Store != nil && len(removed) > 0 {
		learnt, _ := s.mem.LearntFrom(r.Context(), hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true}, removed...)
		for _, e := range learnt {
			res.Derived = append(res.Derived, e.ID)
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
	s.write(w, r, StoreOp{Kind: memory.OpPurge, Namespace: req.Namespace, IDs: req.IDs})
}

// PurgeTasks asks the daemon to remove tasks for good (see
// traces.Store.PurgeTasks).
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
