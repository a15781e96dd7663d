package daemon

import (
	"context"
	"time"
)

// tick is the finality loop's period (see Server.Tick).
func (s *Server) tick() time.Duration {
	if s.Tick > 0 {
		return s.Tick
	}
	return min(max(s.Traces.IdleGap()/10, time.Second), 30*time.Second)
}

// loop runs a pass at once, then every tick and whenever Kick asks,
// until ctx is done.
func (s *Server) loop(ctx context.Context) {
	t := time.NewTicker(s.tick())
	defer t.Stop()
	s.pass(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.run.kick:
		}
		s.pass(ctx)
	}
}

// pass makes idle tasks final and hands final tasks to reflection.
func (s *Server) pass(ctx context.Context) {
	final, err := s.Traces.FinalizeIdle(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Error("finalize idle tasks", "err", err)
		}
		return
	}
	for _, id := range final {
		s.Logger.Info("task final", "task", id)
	}
	s.m.final.Add(float64(len(final)))
	s.enqueue(ctx)
}

// enqueue hands final tasks to the reflection queue; a task the queue does
// not take stays waiting for the next pass.
func (s *Server) enqueue(ctx context.Context) {
	if s.Queue == nil {
		return
	}
	ids, err := s.Traces.Unqueued(ctx)
	if err != nil {
		s.Logger.Error("list final tasks", "err", err)
		return
	}
	for _, id := range ids {
		if err := s.Queue.Enqueue(ctx, id); err != nil {
			s.m.enqueueFailures.Inc()
			s.Logger.Warn("hand task to reflection; will retry", "task", id, "err", err)
			return
		}
		if err := s.Traces.MarkQueued(ctx, id); err != nil {
			s.Logger.Error("mark task queued", "task", id, "err", err)
		}
	}
}

// Kick asks the loop for a pass now.
func (s *Server) Kick() {
	s.init()
	select {
	case s.run.kick <- struct{}{}:
	default:
	}
}
