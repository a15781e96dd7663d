package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/internal/erase"
	"github.com/hindsight-proxy/hindsight/memory"
	"github.com/hindsight-proxy/hindsight/sidecar"
	"github.com/hindsight-proxy/hindsight/spool"
	storepkg "github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	tracestore "github.com/hindsight-proxy/hindsight/traces"
	"github.com/hindsight-proxy/hindsight/ui"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func daemonCmd(g *globals) *cobra.Command {
	c := leaf("daemon [--metrics-listen ADDR [--metrics-allow-remote]]", "run the daemon in the foreground (normally started by the first sidecar)",
		"  hindsight daemon\n  hindsight daemon --metrics-listen 127.0.0.1:9464")
	// The defaults come from the configuration, read once the command
	// line is: see runDaemon.
	c.Flags().String("metrics-listen", "", "also serve GET /metrics over TCP at this loopback address, e.g. 127.0.0.1:9464 (default: config daemon.metrics_listen)")
	c.Flags().Bool("metrics-allow-remote", false, "allow --metrics-listen off loopback (the metrics need no token; default: config daemon.metrics_allow_remote)")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error { return runDaemon(ctx, g, fs, pos) })
}

// runDaemon runs the daemon in the foreground until SIGINT or SIGTERM. fs
// holds its flags, which override the configuration when given (fs may be
// nil: no flags).
func runDaemon(ctx context.Context, g *globals, fs *pflag.FlagSet, args []string) error {
	metricsListen, metricsRemote := &g.config.Daemon.MetricsListen, &g.config.Daemon.MetricsAllowRemote
	// A refused address on the command line stops here; one from the
	// configuration is logged by the daemon, which runs on without it (a
	// sidecar starts it with no flags).
	flagSet := fs != nil && fs.Changed("metrics-listen")
	if flagSet {
		*metricsListen, _ = fs.GetString("metrics-listen")
	}
	if fs != nil && fs.Changed("metrics-allow-remote") {
		*metricsRemote, _ = fs.GetBool("metrics-allow-remote")
	}
	if flagSet && *metricsListen != "" && !*metricsRemote {
		if host, _, err := net.SplitHostPort(*metricsListen); err != nil || (host != "" && !daemon.IsLoopbackHost(host)) { // no host: 127.0.0.1 (daemon.ListenTCP)
			return fmt.Errorf("%w: refusing to serve metrics on %s, which is not a loopback address, without --metrics-allow-remote", errUsage, *metricsListen)
		}
	}
	if len(args) > 0 {
		return fmt.Errorf("%w: daemon takes no arguments", errUsage)
	}
	if what := backends.missing(g.config); what != "" {
		return execFull(what)
	}
	// One processor, as a daemon a sidecar starts gets (see
	// daemon.EnsureRunning): on the few cores beside an agent, waking a
	// second thread for every batch cost more than the batches.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	memEnv := os.Getenv("GOMEMLIMIT") != ""
	memLimit := daemon.SetMemoryLimit(memEnv) // GOMEMLIMIT, else daemon.MemoryBudget
	if !memEnv {
		follow, stopFollow := context.WithCancel(ctx)
		defer stopFollow()
		go daemon.FollowLiveHeap(follow, daemon.MemoryBudget)
	}
	logger, closer, err := openLog(g, "daemon")
	if err != nil {
		return err
	}
	logger.Debug("soft memory limit", "bytes", memLimit)
	defer closer.Close()
	slog.SetDefault(logger) // libraries that log to the default logger
	stopWatchdog := shutdownWatchdog(ctx, logger, shutdownLimit)
	defer stopWatchdog()
	started := false
	err = serveDaemon(ctx, g, logger, &started)
	if err != nil {
		logger.Error("daemon stopped", "err", err)
		if !started {
			noteStartError(g.home, err)
		}
	}
	return err
}

// serveDaemon runs the daemon; it sets *started once it serves.
func serveDaemon(ctx context.Context, g *globals, logger *slog.Logger, started *bool) error {
	lock, err := daemon.AcquireLock(g.home)
	if err != nil {
		return err
	}
	defer lock.Release()
	// Everything the daemon writes (Badger files, the socket) is private.
	privateUmask()

	// What the daemon opened, closed last first when it stops (see
	// shutdown: a home that is gone skips them).
	var closers []namedCloser
	var ln net.Listener
	defer func() { shutdown(ln, closers, logger) }()

	// Opening a Badger database writes through mapped files, which a full
	// disk answers with SIGBUS: start only with room (the sidecar that
	// starts the daemon tries again every few seconds, holding its steps).
	if err := os.MkdirAll(g.home.DaemonData(), 0o700); err != nil {
		return fmt.Errorf("create daemon data: %w", err)
	}
	if err := diskspace.Check(g.home.DaemonData(), diskspace.ReserveFor(g.home.DaemonData(), g.diskReserve, diskspace.DefaultDaemonReserve), 0); err != nil {
		return fmt.Errorf("open daemon stores: %w", err)
	}
	// Opened under diskspace.Contain: a fault in a mapped write on this
	// goroutine (the disk filled after the check) fails the start instead
	// of killing the process without a word in the log.
	var traces *tracestore.Store
	err = diskspace.Contain("open trace store", func() (err error) {
		traces, err = tracestore.Open(filepath.Join(g.home.DaemonData(), "traces"),
			tracestore.Options{IdleGap: g.config.Daemon.IdleGap, Logger: logger})
		return err
	})
	if err != nil {
		return err
	}
	closers = append(closers, namedCloser{"trace store", traces})
	// What purges and retention left in the value-log file that was being
	// appended to then: Badger opened a new one, so the old can go now.
	if err := erase.CollectValueLog(traces.DB()); err != nil {
		logger.Warn("collect the trace store's value log", "err", err)
	}

	store, backend, err := openExperienceStore(ctx, g, logger)
	if err != nil {
		// Traces still flow without an experience store; say why the
		// experience commands answer 503.
		logger.Error("experience store unavailable", "backend", backend, "err", err)
	}
	if store != nil {
		closers = append(closers, namedCloser{"experience store", store})
	}

	var queue daemon.ReflectionQueue
	if q, closer, err := newReflectionQueue(ctx, g, traces, store, logger); err != nil {
		logger.Error("reflection unavailable", "err", err)
	} else {
		queue = q
		closers = append(closers, namedCloser{"reflection queue", closer})
	}

	// Metrics at GET /metrics on the socket: the daemon's own, the Go
	// runtime's and the process's (RSS), and reflection's when it has them.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		daemon.LossCollector(g.home),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hindsight_capture_spill_lost_total",
			Help: "Exchanges found spilled by dead sidecars and deleted unread (sealed with a key that died with them).",
		}, func() float64 { return float64(capture.SpillLost()) }))
	if c, ok := queue.(prometheus.Collector); ok {
		if err := reg.Register(c); err != nil {
			logger.Warn("register reflection metrics", "err", err)
		}
	}
	if c, ok := store.(prometheus.Collector); ok { // Weaviate's compaction
		if err := reg.Register(c); err != nil {
			logger.Warn("register experience store metrics", "err", err)
		}
	}
	// Imported experiences and episodes (hindsight mcp's store_episode)
	// pass the sidecars' redactor; the built-in rules when the
	// configured ones are broken.
	var importRedactor daemon.Redactor
	red, err := newRedactor(g)
	if err != nil {
		logger.Error("the configured redaction rules are broken; imports and episodes use the built-in ones", "err", err)
		red, err = capture.NewRedactor(capture.RedactorConfig{})
	}
	if err == nil {
		importRedactor = red
	} else {
		logger.Error("the built-in redaction rules are broken; imports and episodes are refused", "err", err)
	}
	// Experience-store writes made while the store is unreachable wait,
	// in order, in the trace database.
	storeOps, err := memory.NewOps(traces, logger)
	if err != nil {
		return err
	}
	if p, ok := store.(*storepkg.Pending); ok { // apply what waits once it opens
		go func() {
			select {
			case <-p.Ready():
				storeOps.Kick()
			case <-ctx.Done():
			}
		}()
	}
	srv := &daemon.Server{
		StoreOps:  storeOps,
		Registry:  reg,
		Traces:    traces,
		Store:     store,
		StoreName: backend,
		Queue:     queue,
		Namespace: g.config.Store.Namespace,
		Home:      g.home,
		Version:   versionString(),
		Logger:    logger,
		Space:     &daemon.SpaceGuard{Dir: g.home.DaemonData(), Reserve: g.diskReserve, Logger: logger},

		Redactor:   importRedactor,
		CPUProfile: os.Getenv("HINDSIGHT_DAEMON_CPUPROFILE"), // from start to clean shutdown
		Retention: daemon.Retention{Traces: g.config.Retention.Traces, TracesMaxBytes: g.config.Retention.TracesMaxBytes,
			SetAside: g.config.Retention.SetAside},
	}
	ln, err = daemon.Listen(g.home, lock)
	if err != nil {
		return err
	}
	// A daemon does not outlive its home: when its socket file disappears
	// (the home was deleted) or another daemon's replaces it, it stops.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// The web UI starts on the first POST /v1/ui (`hindsight ui`) and
	// stops with the daemon.
	srv.Drain = func(ctx context.Context) { drainLoop(ctx, g.home, storeDeliverer{traces, srv}, g.diskReserve, logger) }
	srv.UI = (&ui.Launcher{Addr: g.config.UI.Listen, Daemon: daemon.NewClient(g.home.Socket()), Logger: logger, Ctx: ctx}).URL
	if addr := g.config.Daemon.MetricsListen; addr != "" {
		serveMetricsTCP(ctx, addr, g.config.Daemon.MetricsAllowRemote, reg, logger)
	}
	go func() {
		if err := daemon.WatchSocket(ctx, ln, 0); err != nil {
			logger.Warn("stopping: the daemon's home is gone", "err", err)
			stop(err)
		}
	}()
	logger.Info("daemon started", "socket", g.home.Socket(), "idle_gap", traces.IdleGap().String(), "store", backend)
	*started = true
	clearStartError(g.home)
	// For a person running it in a terminal (stderr is /dev/null when a
	// sidecar started it).
	g.info("hindsight daemon: listening on %s (log: %s)", g.home.Socket(), g.home.Path("logs", "daemon.log"))
	err = srv.Serve(ctx, ln)
	logger.Info("daemon stopping", "reason", context.Cause(ctx))
	return err
}

// serveMetricsTCP serves reg at GET /metrics on addr until ctx is done. A
// refused or busy address is logged, not fatal: the daemon still serves
// its sidecars.
func serveMetricsTCP(ctx context.Context, addr string, allowRemote bool, reg *prometheus.Registry, logger *slog.Logger) {
	mln, err := daemon.ListenTCP(addr, allowRemote)
	if err != nil {
		logger.Error("no metrics over TCP", "err", err)
		return
	}
	logger.Info("metrics over TCP", "addr", mln.Addr().String())
	go func() {
		if err := daemon.ServeMetrics(ctx, mln, reg, logger); err != nil {
			logger.Error("metrics over TCP stopped", "err", err)
		}
	}()
}

// namedCloser is something the daemon closes when it stops.
type namedCloser struct {
	name string
	c    io.Closer
}

// closeTimeout bounds closing one store when the daemon stops. Badger
// retries a failed memtable flush for ever (a full disk, a deleted
// directory); the write-ahead log keeps what the flush would have written.
const closeTimeout = 10 * time.Second

// shutdownLimit bounds the daemon's whole shutdown after SIGTERM or SIGINT.
const shutdownLimit = 30 * time.Second

// shutdown stops listening and closes the stores, last opened first, each
// within closeTimeout; once one does not close in time the rest are left
// to the process's exit (closing a store under a queue still running
// would be worse). When the daemon's home is gone nothing is closed:
// Badger could not flush into deleted directories and would wait for ever.
func shutdown(ln net.Listener, closers []namedCloser, logger *slog.Logger) {
	if ln != nil {
		if err := daemon.SocketGone(ln); err != nil {
			logger.Warn("home is gone; leaving without closing the stores", "err", err)
			ln.Close()
			return
		}
		ln.Close()
	}
	for i := len(closers) - 1; i >= 0; i-- {
		c := closers[i]
		done := make(chan error, 1)
		go func() { done <- c.c.Close() }()
		select {
		case err := <-done:
			if err != nil {
				logger.Warn("close "+c.name, "err", err)
			}
		case <-time.After(closeTimeout):
			logger.Error("close "+c.name+": no answer; leaving without closing the rest", "timeout", closeTimeout.String())
			return
		}
	}
}

// shutdownWatchdog ends the process when it has not finished limit after
// ctx is done (a signal): SIGTERM always ends the daemon. The returned func
// disarms it.
func shutdownWatchdog(ctx context.Context, logger *slog.Logger, limit time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		select {
		case <-done:
		case <-time.After(limit):
			logger.Error("shutdown did not finish in time; exiting", "limit", limit.String())
			os.Exit(1)
		}
	}()
	return func() { close(done) }
}

// openExperienceStore opens the configured experience store: embedded (the
// default) in the daemon's data directory, or Weaviate. Vectors come from
// the configured embeddings model, else from the built-in local embedder.
func openExperienceStore(ctx context.Context, g *globals, logger *slog.Logger) (hindsight.ExperienceStore, string, error) {
	backend := g.config.Store.Backend
	if backend == "" {
		backend = "embedded"
	}
	if backend != "embedded" && backend != "weaviate" {
		return nil, backend, fmt.Errorf("unknown store backend %q (want embedded or weaviate)", backend)
	}
	emb, err := newEmbedder(ctx, g)
	if err != nil {
		return nil, backend, err
	}
	switch backend {
	case "weaviate":
		if backends.Weaviate == nil {
			return nil, backend, fmt.Errorf("open experience store: this build has no Weaviate backend (use %s)", FullBinary)
		}
		w := g.config.Store.Weaviate
		urls, err := weaviateURLs(w.URL)
		if err == nil && len(urls) == 0 {
			err = errors.New("no address")
		}
		if err != nil {
			return nil, backend, fmt.Errorf("open experience store: store.weaviate.url %q: %w", w.URL, err)
		}
		open := func(ctx context.Context) (hindsight.ExperienceStore, error) {
			st, err := backends.Weaviate(ctx, WeaviateConfig{URL: urls[0], Failover: urls[1:], GRPC: w.GRPC, APIKey: w.APIKey,
				ReplicationFactor: w.ReplicationFactor, Consistency: w.Consistency}, emb, logger)
			if err != nil {
				return nil, err
			}
			if _, err := reembed(ctx, st, emb, logger, g.quiet); err != nil {
				logger.Error("experiences keep their old vectors", "err", err)
			}
			return st, nil
		}
		// A Weaviate down at start is opened in the background: the
		// daemon serves meanwhile, as during an outage.
		st, err := openOrPending(ctx, emb, logger, open)
		return st, backend, err
	default:
		// Opened under diskspace.Contain, like the trace store.
		var st *embedded.Store
		err := diskspace.Contain("open experience store", func() (err error) {
			st, err = embedded.OpenDaemon(filepath.Join(g.home.DaemonData(), "experiences"), emb, embedded.Options{Logger: logger})
			return err
		})
		if err != nil {
			return nil, backend, err
		}
		// Before the socket opens: the store never mixes embedders, and
		// sidecars buffer while the daemon does not answer.
		if _, err := reembed(ctx, st, emb, logger, g.quiet); err != nil {
			logger.Error("experiences keep their old vectors; they are found by text only", "err", err)
		}
		// Loading the index (a snapshot and the writes after it, or a
		// rebuild) leaves its decoding's garbage: give those pages back
		// before serving, not as the scavenger gets to them (the daemon
		// runs on one processor: beside the first requests it would
		// delay them as much).
		debug.FreeOSMemory()
		return st, backend, nil
	}
}

// newEmbedder returns the embeddings model of the configuration, or the
// local embedder when none is configured. A configured model that does not
// answer is an error, not a silent fallback: the store would re-embed
// everything with another embedder.
func newEmbedder(ctx context.Context, g *globals) (hindsight.Embedder, error) {
	if g.config.LLM.EmbedModel == "" {
		return embedder.NewLocal(0), nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if backends.Embedder == nil {
		return nil, fmt.Errorf("embeddings model %s: this build has no OpenAI-compatible client (use %s)", g.config.LLM.EmbedModel, FullBinary)
	}
	emb, err := backends.Embedder(ctx, g.config.LLM.BaseURL, g.config.LLM.APIKey, g.config.LLM.EmbedModel)
	if err != nil {
		return nil, fmt.Errorf("embeddings model %s: %w", g.config.LLM.EmbedModel, err)
	}
	return emb, nil
}

// orphanDrainInterval spaces the daemon's sweeps for outboxes of dead
// sidecars.
const orphanDrainInterval = 30 * time.Second

// drainLoop delivers the outboxes that dead sidecars left behind straight
// into the trace store, at start and every orphanDrainInterval, keeping
// reserve free (see spool.DrainOptions.DiskReserve).
func drainLoop(ctx context.Context, home hindsight.Home, d storeDeliverer, reserve int64, logger *slog.Logger) {
	for {
		n, err := capture.DrainOrphans(ctx, home, d, reserve)
		if err != nil && ctx.Err() == nil {
			logger.Warn("drain outboxes of dead sidecars", "delivered", n, "err", err)
		} else if n > 0 {
			logger.Info("drained outboxes of dead sidecars", "delivered", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(orphanDrainInterval):
		}
	}
}

// storeDeliverer delivers steps into the daemon's own trace store, and
// the ends noted with them to the daemon (spool.Ender).
type storeDeliverer struct {
	t   *tracestore.Store
	srv *daemon.Server
}

func (d storeDeliverer) DeliverEnd(ctx context.Context, source string, e spool.End) error {
	return d.srv.ApplyEnd(ctx, source, e)
}

func (d storeDeliverer) Deliver(ctx context.Context, steps []hindsight.Step) error {
	return sidecar.SpoolError(d.t.Deliver(ctx, steps))
}

// DeliverRaw stores steps as their outbox encoded them, without decoding
// and encoding them again (spool.RawDeliverer).
func (d storeDeliverer) DeliverRaw(ctx context.Context, steps []json.RawMessage) error {
	return sidecar.SpoolError(d.t.DeliverRaw(ctx, steps))
}
