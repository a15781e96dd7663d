package daemon

import "net/http"

// handleSteps stores a step batch (POST /v1/steps and /v1/steps/compact):
// 400 when it does not decode or validate, 507 while the disk is short of
// space; the answer counts the steps accepted and the duplicates skipped.
func (s *Server) handleSteps(w http.ResponseWriter, r *http.Request) {
	steps, body, err := readSteps(w, r)
	defer putBody(body) // nothing holds the steps once they are stored
	if err != nil {
		s.m.rejected.Inc()
		s.Logger.Warn("refused a step batch", "err", err)
		s.fail(w, r, err)
		return
	}
	if err := steps.Validate(); err != nil {
		s.m.rejected.Inc()
		s.Logger.Warn("refused a step batch", "steps", steps.Len(), "err", err)
		s.fail(w, r, badRequest("%v", err))
		return
	}
	// Storing a step costs about twice its size (the log, then a table).
	if err := s.Space.Check(2 * steps.Size()); err != nil {
		s.Space.refused.Add(1)
		s.fail(w, r, err)
		return
	}
	res, err := s.Traces.IngestBatch(r.Context(), steps)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.m.countBatch(res)
	if res.Closed > 0 {
		s.Kick() // sessions closed with this batch: their tasks may be final
	}
	if res.Duplicates > 0 {
		s.Logger.Debug("redelivered steps skipped", "duplicates", res.Duplicates)
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res.AppendJSON(make([]byte, 0, 64)))
}

// handleSessionClose records that a sidecar's session ended (POST
// /v1/sessions/close; see traces.Store.CloseSession) and answers the tasks
// that became final.
func (s *Server) handleSessionClose(w http.ResponseWriter, r *http.Request) {
	var c SessionClose
	if err := decodeBody(w, r, &c); err != nil {
		s.fail(w, r, err)
		return
	}
	if c.SessionID == "" {
		s.fail(w, r, badRequest("no session_id"))
		return
	}
	final, err := s.Traces.CloseSession(r.Context(), c.SessionID, c.Source, c.LastSeq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, id := range final {
		s.Logger.Info("task final", "task", id, "closed_session", c.SessionID)
	}
	s.m.final.Add(float64(len(final)))
	if len(final) > 0 {
		s.Kick()
	}
	if final == nil {
		final = []string{}
	}
	writeJSON(w, http.StatusOK, SessionCloseResult{Final: final})
}
