// Package daemon is Hindsight's per-machine daemon: the trace store that
// segments steps into tasks, the HTTP/JSON API on a 0600 Unix socket that
// sidecars and the command line speak to, and the client for it.
package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/profile"
	"github.com/hindsight-proxy/hindsight/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the daemon: it serves the API and runs the loop that makes idle
// tasks final and hands final tasks to reflection.
type Server struct {
	Traces    *TraceStore               // required
	Store     hindsight.ExperienceStore // nil: experience endpoints answer 503
	StoreName string                    // "embedded" or "weaviate", for status
	Queue     ReflectionQueue           // nil: no reflection
	Namespace string                    // default namespace; "" means hindsight.DefaultNamespace
	Home      hindsight.Home
	Version   string
	Logger    *slog.Logger // nil: slog.Default()
	// Redactor cleans imported experiences and episodes; nil: the
	// built-in rules.
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

	// UI, when set, starts the web UI unless it runs and returns its URL
	// (POST /v1/ui); nil: the daemon serves no UI (503).
	UI func(ctx context.Context) (string, error)

	startOnce sync.Once
	started   time.Time
	mux       *http.ServeMux
	kick      chan struct{}
	m         metrics
	sidecars  *sidecarMetrics
	episodeMu sync.Mutex // serializes episodes that take the next index
}

// metrics count what the daemon did, for GET /metrics.
type metrics struct {
	ingested, duplicates, batches, rejected, final, enqueueFailures prometheus.Counter
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
	s.sidecars = newSidecarMetrics()
	for _, col := range []prometheus.Collector{opsDepth, s.sidecars, s.m.ingested, s.m.duplicates, s.m.batches, s.m.rejected, s.m.final, s.m.enqueueFailures, diskRefused, diskLow} {
		if err := s.Registry.Register(col); err != nil {
			s.Logger.Warn("register daemon metric", "err", err)
		}
	}
}

func (s *Server) init() {
	s.startOnce.Do(func() {
		s.started = time.Now()
		s.kick = make(chan struct{}, 1)
		if s.Logger == nil {
			s.Logger = slog.Default()
		}
		s.initMetrics()
		if s.StoreOps != nil && s.StoreOps.Apply == nil {
			s.StoreOps.Apply = func(ctx context.Context, op *StoreOp) error {
				_, err := s.applyOp(ctx, op)
				return err
			}
		}
		s.mux = http.NewServeMux()
		s.routes()
	})
}

func (s *Server) namespace(ns string) string {
	switch {
	case ns != "":
		return ns
	case s.Namespace != "":
		return s.Namespace
	}
	return hindsight.DefaultNamespace
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.init()
	s.Space.Touch()
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := s.mux
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
	m.HandleFunc("POST /v1/sidecars/report", s.handleSidecarReport)
	m.HandleFunc("POST /v1/reflect", s.handleReflect)
	m.HandleFunc("POST /v1/reflect/replay", s.handleReflectReplay)
	m.Handle("GET /metrics", promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{}))
}

// Serve answers on ln and runs the finality loop until ctx is done, then
// shuts down cleanly: in-flight requests finish, a last pass makes idle
// tasks final and hands them to reflection.
//
// When the environment names a file in HINDSIGHT_DAEMON_CPUPROFILE, Serve
// writes a CPU profile of the daemon there, from start to clean shutdown
// (for measuring ingest; a sidecar's HINDSIGHT_CPUPROFILE is its own).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.init()
	if path := os.Getenv(CPUProfileEnv); path != "" {
		stop, err := profile.StartCPU(path)
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
	if s.StoreOps != nil {
		wg.Go(func() { s.StoreOps.Run(loopCtx) })
	}
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
	if s.StoreOps != nil && s.StoreOps.Depth() > 0 {
		if e := s.StoreOps.Drain(shutCtx); e != nil {
			s.Logger.Warn("store writes stay queued for the next start", "queued", s.StoreOps.Depth(), "err", e)
		}
	}
	return err
}

// CPUProfileEnv names the environment variable that makes Serve write a
// CPU profile of the daemon (see Serve).
const CPUProfileEnv = "HINDSIGHT_DAEMON_CPUPROFILE"

func (s *Server) tick() time.Duration {
	if s.Tick > 0 {
		return s.Tick
	}
	return min(max(s.Traces.IdleGap()/10, time.Second), 30*time.Second)
}

func (s *Server) loop(ctx context.Context) {
	t := time.NewTicker(s.tick())
	defer t.Stop()
	s.pass(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
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
	case s.kick <- struct{}{}:
	default:
	}
}

// --- helpers ---

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	_, _ = w.Write(validUTF8(buf.Bytes()))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// fail answers err with the status it stands for.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, hindsight.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, hindsight.ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, ErrUnavailable), errors.Is(err, hindsight.ErrStoreUnavailable):
		status = http.StatusServiceUnavailable
	case errors.Is(err, ErrDiskFull):
		status = http.StatusInsufficientStorage
	case errors.As(err, &mbe):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, errBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, context.Canceled):
		status = 499
	}
	if status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusInsufficientStorage {
		s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, status, err.Error())
}

var errBadRequest = errors.New("bad request")

func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, a...))
}

// maxBody bounds request bodies: a step batch or an import file.
const maxBody = 256 << 20

func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest("decode body: %v", err)
	}
	return nil
}

// readSteps reads and decodes a step batch (see wire.DecodeBatch).
func readSteps(w http.ResponseWriter, r *http.Request) ([]wire.Raw, error) {
	body, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	steps, err := wire.DecodeBatch(body)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return steps, nil
}

// readBody reads a request's body, up to maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	n := 512
	if r.ContentLength > 0 && r.ContentLength < maxBody {
		n = int(r.ContentLength) + 1 // +1: EOF without growing
	}
	buf := make([]byte, 0, n)
	body := http.MaxBytesReader(w, r.Body, maxBody)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, err
			}
			return nil, badRequest("read body: %v", err)
		}
	}
}

// --- handlers: daemon and traces ---

func (s *Server) health() Health {
	return Health{OK: true, PID: os.Getpid(), Version: s.Version, StartedAt: s.started, Home: string(s.Home)}
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.health())
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	h := s.health()
	st := Status{Daemon: &h, Running: true, Outboxes: []OutboxInfo{}}
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
	st.Experiences = s.storeStats(r.Context())
	if s.StoreOps != nil {
		ops := s.StoreOps.Stats()
		st.StoreOps = &ops
	}
	st.DiskLow, st.DiskRefused = s.Space.Low(), s.Space.Refused()
	if s.Home != "" {
		st.Disk = dirSizes(s.Home.DaemonData())
	}
	writeJSON(w, http.StatusOK, st)
}

// storeStatsTimeout bounds the count of experiences in the status.
const storeStatsTimeout = 3 * time.Second

func (s *Server) storeStats(ctx context.Context) *StoreStats {
	ss := &StoreStats{Backend: s.StoreName}
	if s.Store == nil {
		ss.Error = "no experience store is open"
		return ss
	}
	ss.Available = true
	// An unreachable store would hold the status for its whole retry.
	ctx, cancel := context.WithTimeout(ctx, storeStatsTimeout)
	defer cancel()
	all, err := s.Store.List(ctx, hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true})
	if err != nil {
		ss.Available = !errors.Is(err, hindsight.ErrStoreUnavailable)
		ss.Error = err.Error()
		return ss
	}
	for i := range all {
		ss.Total++
		switch {
		case all[i].Deleted:
			ss.Deleted++
		case all[i].SupersededBy != "":
			ss.Superseded++
		default:
			ss.Active++
		}
	}
	return ss
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
			out[e.Name()] = DirSize(filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// DirSize returns the disk space used by the regular files under dir:
// allocated blocks, not apparent sizes (Badger preallocates sparse value
// logs far larger than what they hold).
func DirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		n += allocatedSize(fi)
		return nil
	})
	return n
}

func (s *Server) handleSteps(w http.ResponseWriter, r *http.Request) {
	steps, err := readSteps(w, r)
	if err != nil {
		s.m.rejected.Inc()
		s.Logger.Warn("refused a step batch", "err", err)
		s.fail(w, r, err)
		return
	}
	if err := validateRaw(steps); err != nil {
		s.m.rejected.Inc()
		s.Logger.Warn("refused a step batch", "steps", len(steps), "err", err)
		s.fail(w, r, badRequest("%v", err))
		return
	}
	// Storing a step costs about twice its size (the log, then a table).
	var size int64
	for _, st := range steps {
		size += int64(len(st.JSON))
	}
	if err := s.Space.Check(2 * size); err != nil {
		s.Space.refused.Add(1)
		s.fail(w, r, err)
		return
	}
	res, err := s.Traces.ingestRaw(r.Context(), steps)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.m.batches.Inc()
	s.m.ingested.Add(float64(res.Accepted))
	s.m.duplicates.Add(float64(res.Duplicates))
	if res.Duplicates > 0 {
		s.Logger.Debug("redelivered steps skipped", "duplicates", res.Duplicates)
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res.appendJSON(make([]byte, 0, 64)))
}

// jsonContentType is the Content-Type header of a JSON answer, shared by
// the answers that set it without copying (nothing changes it).
var jsonContentType = []string{"application/json"}

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

func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request) {
	var f TaskFilter
	q := r.URL.Query()
	if v := q.Get("final"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, r, badRequest("final: %v", err))
			return
		}
		f.Final = &b
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, r, badRequest("limit: not a count: %q", v))
			return
		}
		f.Limit = n
	}
	tasks, err := s.Traces.Tasks(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if tasks == nil {
		tasks = []hindsight.Task{}
	}
	writeJSON(w, http.StatusOK, tasks)
}

// StepAnnotator is implemented by a ReflectionQueue that derives fields
// of a step on read: the error template of a failed call.
type StepAnnotator interface {
	AnnotateStep(s *hindsight.Step)
}

// annotate fills what the reflection queue derives for st, if it can.
func (s *Server) annotate(st *hindsight.Step) {
	if a, ok := s.Queue.(StepAnnotator); ok && st.Method == "tools/call" {
		a.AnnotateStep(st)
	}
}

func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["task"]
	for _, id := range ids {
		if _, err := s.Traces.TaskInfo(r.Context(), id); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/jsonl")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := s.Traces.Steps(r.Context(), ids, func(st *hindsight.Step) error {
		s.annotate(st)
		buf.Reset()
		if err := enc.Encode(st); err != nil {
			return err
		}
		_, err := w.Write(validUTF8(buf.Bytes()))
		return err
	})
	if err != nil {
		// The status line is gone: break the stream so the client sees
		// a truncated export, not a complete one.
		s.Logger.Error("export steps", "err", err)
		panic(http.ErrAbortHandler)
	}
}

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

// readAll is io.ReadAll bounded by maxBody.
func readAll(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
}
