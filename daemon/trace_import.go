package daemon

import (
	"context"
	"errors"
	"net/http"

	"github.com/hindsight-proxy/hindsight"
)

func (s *Server) handleImportSteps(w http.ResponseWriter, r *http.Request) {
	var b StepBatch
	if err := decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.Traces.Import(r.Context(), b.Steps)
	if errors.Is(err, ErrRejected) {
		err = badRequest("%v", err)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.m.countBatch(res)
	if res.Accepted > 0 {
		s.Kick() // hand the imported final tasks to reflection
	}
	writeJSON(w, http.StatusOK, res)
}

// ImportSteps sends steps of another store's export (see
// traces.Store.Import) and says how many were new.
func (c *Client) ImportSteps(ctx context.Context, steps []hindsight.Step) (IngestResult, error) {
	var res IngestResult
	err := c.call(ctx, http.MethodPost, "/traces/import", nil, StepBatch{Steps: steps}, &res)
	return res, err
}
