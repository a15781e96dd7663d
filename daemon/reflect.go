package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// handleReflect reflects now on the tasks named, or the pending ones (POST
// /v1/reflect), streaming its progress as JSON lines, the last one
// Finished.
func (s *Server) handleReflect(w http.ResponseWriter, r *http.Request) {
	var req ReflectRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.Queue == nil {
		s.fail(w, r, fmt.Errorf("reflect: %w: the daemon has no reflection queue", ErrUnavailable))
		return
	}
	// Hand over tasks that went final but were not queued yet, so
	// --pending sees them.
	s.pass(r.Context())
	w.Header().Set("Content-Type", "application/jsonl")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	var last ReflectProgress
	send := func(p ReflectProgress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Finished {
			p.Done, p.Total = last.Done, last.Total
		}
		last = p
		_ = enc.Encode(p)
		if flusher != nil {
			flusher.Flush()
		}
	}
	err := s.Queue.RunNow(r.Context(), req.TaskIDs, req.Pending, func(done, total int) {
		send(ReflectProgress{Done: done, Total: total})
	})
	fin := ReflectProgress{Finished: true}
	if err != nil {
		fin.Error = err.Error()
	}
	send(fin)
}
