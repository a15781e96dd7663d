package daemon

import (
	"context"
	"slices"
	"time"

	"github.com/hindsight-proxy/hindsight/spool"
)

// Retention bounds what the daemon keeps: traces by age and size, and the
// files capture sets aside (steps the daemon refused, outboxes found
// corrupt) by age. Expired data is purged for good (see PurgeTasks).
type Retention struct {
	// Traces purges tasks whose last step is older; 0:
	// DefaultTraceRetention; <0: keep for ever.
	Traces time.Duration
	// TracesMaxBytes purges the oldest tasks while the trace store holds
	// more data (traces.Store.DataBytes; its files lag behind, until
	// compaction and the value log's collection); 0:
	// DefaultTracesMaxBytes; <0: no bound.
	TracesMaxBytes int64
	// SetAside removes files under the outbox directory's .rejected/
	// and .corrupt/ (and outbox databases moved aside as *.corrupt-*)
	// older than this; 0: DefaultSetAsideRetention; <0: keep.
	SetAside time.Duration
	// Every spaces the passes; 0: an hour. The first runs a minute after
	// start (or after Every, if shorter).
	Every time.Duration
}

// Defaults of Retention.
const (
	DefaultTraceRetention    = 30 * 24 * time.Hour
	DefaultTracesMaxBytes    = 2 << 30
	DefaultSetAsideRetention = 30 * 24 * time.Hour
)

func (r Retention) traces() time.Duration { return orDur(r.Traces, DefaultTraceRetention) }
func (r Retention) setAside() time.Duration {
	return orDur(r.SetAside, DefaultSetAsideRetention)
}

func orDur(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// retentionLoop runs retention passes until ctx ends.
func (s *Server) retentionLoop(ctx context.Context) {
	every := s.Retention.Every
	if every <= 0 {
		every = time.Hour
	}
	wait := min(every, time.Minute) // the first pass soon after start
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		s.RetentionPass(ctx, time.Now())
		wait = every
	}
}

// RetentionPass applies Retention once, as of now: expired tasks, then the
// oldest while the trace store is over its size, then old set-aside files.
func (s *Server) RetentionPass(ctx context.Context, now time.Time) {
	r := s.Retention
	if d := r.traces(); d > 0 {
		ids, err := s.Traces.TasksBefore(ctx, now.Add(-d))
		if err == nil && len(ids) > 0 {
			removed, err := s.Traces.PurgeTasks(ctx, ids)
			if err != nil {
				s.Logger.Warn("retention: purge expired tasks", "err", err)
			} else {
				s.Logger.Info("retention: purged expired tasks", "tasks", len(removed), "older_than", d.String())
			}
		}
	}
	limit := r.TracesMaxBytes
	if limit == 0 {
		limit = DefaultTracesMaxBytes
	}
	if limit > 0 {
		for range 20 { // a bounded number of rounds, each a tenth of the tasks
			size, err := s.Traces.DataBytes(ctx)
			if err != nil || size <= limit {
				break
			}
			tasks, err := s.Traces.Tasks(ctx, TaskFilter{})
			if err != nil || len(tasks) <= 1 {
				break
			}
			// Tasks come newest first; the oldest tenth goes (never the
			// newest task).
			n := max(len(tasks)/10, 1)
			var ids []string
			for _, t := range slices.Backward(tasks[1:]) {
				if len(ids) == n {
					break
				}
				ids = append(ids, t.ID)
			}
			removed, err := s.Traces.PurgeTasks(ctx, ids)
			if err != nil {
				s.Logger.Warn("retention: purge the oldest tasks", "err", err)
				break
			}
			s.Logger.Info("retention: trace store over its size; purged the oldest tasks", "tasks", len(removed), "bytes", size, "max_bytes", limit)
		}
	}
	if d := r.setAside(); d > 0 && s.Home != "" {
		if n := spool.RemoveSetAside(s.Home, now.Add(-d)); n > 0 {
			s.Logger.Info("retention: removed old set-aside outbox files", "files", n, "older_than", d.String())
		}
	}
}
