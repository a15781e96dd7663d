// Package daemon is Hindsight's per-machine daemon: the HTTP/JSON API on a
// 0600 Unix socket that sidecars and the command line speak to, over the
// trace store (package traces) and the memory service (package memory),
// the client for it, its lock, socket and autostart. Its configuration
// comes from its caller (the command line), which reads the environment.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/profile"
	"github.com/hindsight-proxy/hindsight/memory"
	"github.com/hindsight-proxy/hindsight/traces"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the daemon: it serves the API and runs the loop that makes idle
// tasks final and hands final tasks to reflection. Its exported fields
// configure it; set them before the first request or Serve.
type Server struct {
	Traces    *traces.Store             // required
	Store     hindsight.ExperienceStore // nil: experience endpoints answer 503
	StoreName string                    // "embedded" or "weaviate", for status
	Queue     ReflectionQueue           // nil: no reflection
	Namespace string                    // default namespace; "" means hindsight.DefaultNamespace
	Home      hindsight.Home
	Version   string
	Logger    *slog.Logger // nil: slog.Default()
	// Redactor cleans imported experiences and episodes; nil: imports
	// and episodes answer 503.
	Redactor Redactor
	Tick     time.Duration // period of the finality loop; 0: a tenth of the idle gap, 1s to 30s

	// Retention bounds the traces kept and the set-aside outbox files
	// (see Retention); its passes run in the background from start.
	Retention Retention

	// Drain, when set, is run in the background at start: the daemon
	// drains outboxes that dead sidecars left behind.
	Drain func(ctx context.Context)

	// Space, when set, refuses step batches while the disk is short of
	// space (507; the sidecars hold them) and keeps the databases' logs
	// allocated ahead; Serve runs it.
	Space *SpaceGuard
	// ReflectFallback is how long a waiting POST /v1/tasks/final leaves a
	// task to the reflection queue's worker; 0: DefaultReflectFallback.
	ReflectFallback time.Duration

	// Registry receives the daemon's metrics, served at GET /metrics; nil:
	// a registry of its own.
	Registry *prometheus.Registry

	// StoreOps, when set, keeps the experience-store writes made while
	// the store is unreachable and applies them, in order, once it is
	// back (its Apply is set to the daemon's); Serve runs it. nil: such
	// writes fail.
	StoreOps *StoreOps

	// HitFlush is how often the hits searches count are written to the
	// experience store (they wait in memory meanwhile); 0:
	// memory.DefaultHitFlush.
	HitFlush time.Duration

	// UI, when set, starts the web UI unless it runs and returns its URL
	// (POST /v1/ui); nil: the daemon serves no UI (503).
	UI func(ctx context.Context) (string, error)

	// CPUProfile, when set, names a file Serve writes a CPU profile of
	// the daemon to, from start to clean shutdown (for measuring ingest).
	CPUProfile string

	run       runState
	m         metrics
	mem       *memory.Service // the experience store's API, over Store
	episodeMu sync.Mutex      // serializes episodes that take the next index
}

// runState is what init sets up once, for the handlers and the loop.
type runState struct {
	once    sync.Once
	started time.Time
	mux     *http.ServeMux
	kick    chan struct{} // asks the finality loop for a pass now
}

func (s *Server) init() {
	s.run.once.Do(func() {
		s.run.started = time.Now()
		s.run.kick = make(chan struct{}, 1)
		if s.Logger == nil {
			s.Logger = slog.Default()
		}
		s.mem = &memory.Service{Store: s.Store, StoreName: s.StoreName, Namespace: s.Namespace,
			Redactor: s.Redactor, Logger: s.Logger, Ops: s.StoreOps, Traces: s.Traces, HitFlush: s.HitFlush}
		if s.Home != "" {
			s.mem.QuarantinePath = s.Home.Path(memory.QuarantineFile)
		}
		if rl, ok := s.Queue.(RejectionLister); ok {
			s.mem.Rejections = rl
		}
		s.mem.Recovered() // counts and logs the hits a daemon that died lost
		s.initMetrics()
		s.run.mux = http.NewServeMux()
		s.routes()
	})
}

func (s *Server) namespace(ns string) string { return s.mem.Resolve(ns) }

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	s.Space.Touch()
	s.run.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := s.run.mux
	m.HandleFunc("GET /v1/health", s.handleHealth)
	m.HandleFunc("GET /v1/status", s.handleStatus)
	m.HandleFunc("POST /v1/steps", s.handleSteps)
	// Both take compact steps; a sidecar posts those to this path, which a
	// daemon that cannot read them answers 404 (see Client.IngestRaw).
	m.HandleFunc("POST /v1/steps/compact", s.handleSteps)
	m.HandleFunc("POST /v1/sessions/close", s.handleSessionClose)
	m.HandleFunc("GET /v1/tasks", s.handleTasks)
	m.HandleFunc("POST /v1/tasks/final", s.handleFinal)
	m.HandleFunc("POST /v1/episodes", s.handleEpisode)
	m.HandleFunc("GET /v1/tasks/{id}", s.handleTask)
	m.HandleFunc("GET /v1/export", s.handleExport)
	m.HandleFunc("POST /v1/traces/import", s.handleImportSteps)
	m.HandleFunc("GET /v1/experiences", s.handleExperiences)
	m.HandleFunc("POST /v1/experiences/search", s.handleSearch)
	m.HandleFunc("POST /v1/experiences/import", s.handleImport)
	m.HandleFunc("POST /v1/experiences/purge", s.handlePurgeExperiences)
	m.HandleFunc("POST /v1/tasks/purge", s.handlePurgeTasks)
	m.HandleFunc("GET /v1/experiences/export", s.handleExportExperiences)
	m.HandleFunc("GET /v1/experiences/rejected", s.handleRejected)
	m.HandleFunc("GET /v1/experiences/{id}", s.handleExperience)
	m.HandleFunc("POST /v1/experiences/{id}/forget", s.handleForget)
	m.HandleFunc("POST /v1/experiences/{id}/restore", s.handleRestore)
	m.HandleFunc("POST /v1/experiences/{id}/edit", s.handleEdit)
	m.HandleFunc("POST /v1/experiences/{id}/pin", s.handlePin)
	m.HandleFunc("POST /v1/ui", s.handleUI)
	m.HandleFunc("GET /v1/tools", s.handleTools)
	m.HandleFunc("POST /v1/tools/approve", s.handleApproveTool)
	m.HandleFunc("POST /v1/sidecars/report", s.handleSidecarReport)
	m.HandleFunc("POST /v1/reflect", s.handleReflect)
	m.HandleFunc("POST /v1/reflect/replay", s.handleReflectReplay)
	m.Handle("GET /metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
}

// Serve answers on ln and runs the finality loop until ctx is done, then
// shuts down cleanly: in-flight requests finish, a last pass makes idle
// tasks final and hands them to reflection, the hits searches counted are
// written and the queued store writes applied as far as the store lets.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.init()
	if s.CPUProfile != "" {
		stop, err := profile.StartCPU(s.CPUProfile)
		if err != nil {
			s.Logger.Warn("no cpu profile", "err", err)
		} else {
			defer stop()
		}
	}
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	loopCtx, stopLoop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.loop(loopCtx) })
	if s.Drain != nil {
		wg.Go(func() { s.Drain(loopCtx) })
	}
	if s.Space != nil {
		s.Space.Logger = s.Logger
		wg.Go(func() { s.Space.Run(loopCtx) })
	}
	wg.Go(func() { s.retentionLoop(loopCtx) })
	wg.Go(func() { s.mem.Run(loopCtx) })
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("serve: %w", err)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if e := hs.Shutdown(shutCtx); e != nil {
		s.Logger.Warn("shutdown left requests unfinished", "err", e)
	}
	stopLoop()
	wg.Wait()
	s.pass(shutCtx) // the final drain
	s.mem.Close(shutCtx)
	return err
}
