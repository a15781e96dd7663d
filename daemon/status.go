package daemon

import (
	"net/http"
	"os"
	"path/filepath"

	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/hindsight-proxy/hindsight/toolpin"
	"github.com/hindsight-proxy/hindsight/traces"
	"github.com/prometheus/client_golang/prometheus"
)

func (s *Server) health() Health {
	return Health{OK: true, PID: os.Getpid(), Version: s.Version, StartedAt: s.run.started, Home: string(s.Home)}
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.health())
}

// handleStatus answers what `hindsight status` shows of the daemon (GET
// /v1/status); the sidecars' outboxes are the command's to add.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	h := s.health()
	st := Status{Daemon: &h, Running: true, Outboxes: []spool.Info{}}
	ts, err := s.Traces.Stats(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	st.Traces = &ts
	if s.Queue != nil {
		qs, err := s.Queue.Stats(r.Context())
		if err != nil {
			qs.LastError = "stats: " + err.Error()
		}
		st.Reflection = &qs
	}
	st.Experiences = s.mem.Stats(r.Context())
	if s.StoreOps != nil {
		ops := s.StoreOps.Stats()
		st.StoreOps = &ops
	}
	st.DiskLow, st.DiskRefused = s.Space.Low(), s.Space.Refused()
	if s.Home != "" {
		st.Disk = dirSizes(s.Home.DaemonData())
		tools := toolpin.Summarize(s.Home)
		st.Tools = &tools
	}
	writeJSON(w, http.StatusOK, st)
}

// dirSizes returns the bytes held by each directory directly under dir.
func dirSizes(dir string) map[string]int64 {
	out := map[string]int64{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if e.IsDir() {
			out[e.Name()] = diskspace.DirSize(filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// metrics count what the daemon did, and hold what sidecars report of
// themselves, for GET /metrics.
type metrics struct {
	ingested, duplicates, batches, rejected, final, enqueueFailures prometheus.Counter

	sidecars *sidecarMetrics
}

// countBatch counts a stored step batch: its steps accepted and the
// duplicates skipped.
func (m *metrics) countBatch(res traces.IngestResult) {
	m.batches.Inc()
	m.ingested.Add(float64(res.Accepted))
	m.duplicates.Add(float64(res.Duplicates))
}

func (s *Server) initMetrics() {
	if s.Registry == nil {
		s.Registry = prometheus.NewRegistry()
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	s.m = metrics{
		ingested:        c("hindsight_daemon_steps_ingested_total", "Steps stored in the trace store."),
		duplicates:      c("hindsight_daemon_steps_duplicate_total", "Redelivered steps skipped."),
		batches:         c("hindsight_daemon_step_batches_total", "Step batches stored (each costs a commit and two disk syncs)."),
		rejected:        c("hindsight_daemon_batches_rejected_total", "Step batches refused as bad input."),
		final:           c("hindsight_daemon_tasks_final_total", "Tasks that became final."),
		enqueueFailures: c("hindsight_daemon_enqueue_failures_total", "Failed hand-overs of final tasks to reflection."),
	}
	diskRefused := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hindsight_daemon_batches_refused_disk_full_total",
		Help: "Step batches refused (507) because the disk was short of space; the sidecars hold them."},
		func() float64 { return float64(s.Space.Refused()) })
	diskLow := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hindsight_daemon_disk_low",
		Help: "1 while the daemon refuses steps because the disk is short of space."},
		func() float64 {
			if s.Space.Low() {
				return 1
			}
			return 0
		})
	opsDepth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hindsight_daemon_store_ops_queued",
		Help: "Experience-store writes waiting for the store to be reachable again."},
		func() float64 {
			if s.StoreOps == nil {
				return 0
			}
			return float64(s.StoreOps.Depth())
		})
	s.m.sidecars = newSidecarMetrics()
	for _, col := range append(s.mem.Collectors(), toolsCollector{s.Home}, opsDepth, s.m.sidecars, s.m.ingested, s.m.duplicates, s.m.batches, s.m.rejected, s.m.final, s.m.enqueueFailures, diskRefused, diskLow) {
		if err := s.Registry.Register(col); err != nil {
			s.Logger.Warn("register daemon metric", "err", err)
		}
	}
}
