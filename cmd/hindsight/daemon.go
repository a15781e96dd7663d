package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/store/embed"
	"github.com/hindsight-proxy/hindsight/store/embedded"
)

// runDaemon runs the daemon in the foreground until SIGINT or SIGTERM.
func runDaemon(ctx context.Context, g *globals, args []string) error {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: hindsight daemon") }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: daemon takes no arguments", errUsage)
	}
	logger, closer, err := openLog(g.home, "daemon")
	if err != nil {
		return err
	}
	defer closer.Close()
	slog.SetDefault(logger) // libraries that log to the default logger
	err = serveDaemon(ctx, g, logger)
	if err != nil {
		logger.Error("daemon stopped", "err", err)
	}
	return err
}

func serveDaemon(ctx context.Context, g *globals, logger *slog.Logger) error {
	lock, err := daemon.AcquireLock(g.home)
	if err != nil {
		return err
	}
	defer lock.Release()
	// Everything the daemon writes (Badger files, the socket) is private.
	syscall.Umask(0o077)

	traces, err := daemon.OpenTraceStore(filepath.Join(g.home.DaemonData(), "traces"),
		daemon.TraceOptions{IdleGap: g.config.Daemon.IdleGap, Logger: logger})
	if err != nil {
		return err
	}
	defer traces.Close()

	store, backend, err := openExperienceStore(g, logger)
	if err != nil {
		// Traces still flow without an experience store; say why the
		// experience commands answer 503.
		logger.Error("experience store unavailable", "backend", backend, "err", err)
	}
	if store != nil {
		defer store.Close()
	}

	srv := &daemon.Server{
		Traces:    traces,
		Store:     store,
		StoreName: backend,
		Namespace: g.config.Store.Namespace,
		Home:      g.home,
		Version:   version,
		Logger:    logger,
		Drain:     func(ctx context.Context) { drainLoop(ctx, g.home, traces, logger) },
	}
	ln, err := daemon.Listen(g.home, lock)
	if err != nil {
		return err
	}
	logger.Info("daemon started", "socket", g.home.Socket(), "idle_gap", traces.IdleGap().String(), "store", backend)
	err = srv.Serve(ctx, ln)
	logger.Info("daemon stopping")
	return err
}

// openExperienceStore opens the configured experience store: embedded (the
// default) in the daemon's data directory, or Weaviate.
func openExperienceStore(g *globals, logger *slog.Logger) (hindsight.ExperienceStore, string, error) {
	backend := g.config.Store.Backend
	if backend == "" {
		backend = "embedded"
	}
	switch backend {
	case "embedded":
		st, err := embedded.Open(filepath.Join(g.home.DaemonData(), "experiences"), embed.NewLocal(0), embedded.Options{Logger: logger})
		if err != nil {
			return nil, backend, err
		}
		return st, backend, nil
	case "weaviate":
		return nil, backend, errors.New("the weaviate backend is not built into this binary yet")
	}
	return nil, backend, fmt.Errorf("unknown store backend %q (want embedded or weaviate)", backend)
}

// orphanDrainInterval spaces the daemon's sweeps for outboxes of dead
// sidecars.
const orphanDrainInterval = 30 * time.Second

// drainLoop delivers the outboxes that dead sidecars left behind straight
// into the trace store, at start and every orphanDrainInterval.
func drainLoop(ctx context.Context, home hindsight.Home, traces *daemon.TraceStore, logger *slog.Logger) {
	d := storeDeliverer{traces}
	for {
		n, err := capture.DrainOrphans(ctx, home, d)
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

// storeDeliverer delivers steps into the daemon's own trace store.
type storeDeliverer struct{ t *daemon.TraceStore }

func (d storeDeliverer) Deliver(ctx context.Context, steps []hindsight.Step) error {
	return rejected(d.t.Deliver(ctx, steps))
}
