package sidecar

import (
	"context"
	"os"
	"time"

	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/spool"
)

// reportTimeout bounds one report of counters to the daemon.
const reportTimeout = time.Second

// statsInterval spaces the sidecar's reports of its outbox.
const statsInterval = 2 * time.Second

// postCounters reports capture's counters to the daemon, which serves
// their sums at GET /metrics (see daemon.SidecarReport); a daemon that
// does not answer in reportTimeout misses this report, not the next.
func (s *Sidecar) postCounters(st capture.Stats, refused int64) {
	calls, failures := s.recorder.Calls()
	rep := daemon.SidecarReport{Source: s.recorder.Source(), Server: s.cfg.Server, PID: os.Getpid(),
		Steps: st.Captured, Spilled: st.Spilled, Dropped: st.Dropped, Redactions: st.Redactions, Calls: calls, Failures: failures, BodiesRefused: refused}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	if err := s.client.ReportSidecar(ctx, rep); err != nil {
		s.cfg.Logger.Debug("report counters to the daemon", "err", err)
	}
}

// reportStats writes the outbox's stats into its directory every
// statsInterval, for `hindsight status`, and returns the function that
// stops it.
func (s *Sidecar) reportStats() func() {
	id := s.recorder.Source()
	stop, done := make(chan struct{}), make(chan struct{})
	write := func() {
		st := s.recorder.Stats()
		out := spool.Stats{Server: s.cfg.Server, PID: os.Getpid(), Depth: st.Depth,
			Captured: st.Captured, Delivered: st.Delivered, Dropped: st.Dropped, Rejected: st.Rejected,
			Redactions: st.Redactions, Held: st.Held, DroppedDiskFull: st.DroppedDiskFull, Truncated: st.Truncated,
			BodiesRefused: s.bodiesRefused(), UpdatedAt: time.Now()}
		s.mu.Lock()
		srv := s.server
		s.mu.Unlock()
		if srv != nil {
			out.ServerStarts, out.ServerCrashes = srv.Starts(), srv.Crashes()
			if t := srv.LastCrash(); !t.IsZero() {
				out.LastCrashAt = &t
			}
		}
		_ = spool.WriteStats(s.cfg.Home, id, out)
		s.postCounters(st, out.BodiesRefused)
	}
	go func() {
		defer close(done)
		t := time.NewTicker(statsInterval)
		defer t.Stop()
		for {
			write()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		write() // the last word, after capture's final drain (a removed outbox stays removed)
	}
}

// bodiesRefused returns serve's count of requests refused over its body
// budget (0 for stdio).
func (s *Sidecar) bodiesRefused() int64 {
	s.mu.Lock()
	f := s.refused
	s.mu.Unlock()
	if f == nil {
		return 0
	}
	return f()
}
