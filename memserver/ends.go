package memserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
)

// episodeTasks are the tasks this server stored episodes into that no
// trigger_hindsight ended since: Close ends them.
type episodeTasks struct {
	mu  sync.Mutex
	ids []string
}

func (e *episodeTasks) add(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.ids, id) {
		e.ids = append(e.ids, id)
	}
}

func (e *episodeTasks) remove(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ids = slices.DeleteFunc(e.ids, func(s string) bool { return s == id })
}

func (e *episodeTasks) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := e.ids
	e.ids = nil
	return ids
}

// Close ends the tasks this server stored episodes into and that no
// trigger_hindsight ended: its client is gone, so they are finished, final
// at once and handed to reflection, as a sidecar's session that ends
// makes its task final (not after the idle gap). Call it once the
// transport stopped.
func (s *Server) Close(ctx context.Context) error {
	var errs []error
	for _, id := range s.episodes.take() {
		res, err := s.opt.Daemon.FinalTask(ctx, daemon.FinalRequest{TaskID: id})
		if err != nil && !errors.Is(err, hindsight.ErrNotFound) {
			errs = append(errs, fmt.Errorf("end task %s: %w", id, err))
			continue
		}
		if err == nil && !res.WasFinal {
			s.opt.Logger.Info("task of the episodes ended with the session", "task", id)
		}
	}
	return errors.Join(errs...)
}
