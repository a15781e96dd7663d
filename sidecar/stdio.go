package sidecar

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// RunStdio is the stdio sidecar (`hindsight wrap`): it starts the server
// st names as its child and relays the protocol between it and the agent
// (in and out) until the agent closes in or ctx ends, then closes the
// sidecar. It sets st's Server, Hooks and Logger from cfg. When the
// sidecar cannot start (its home, capture and injection), it logs why and
// relays only: Hindsight's own trouble never costs the agent its server.
func RunStdio(ctx context.Context, cfg Config, st *proxy.Stdio, in io.Reader, out io.Writer) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	logger, name := cfg.Logger, cfg.Server
	cfg.Transport = "stdio"
	var hooks *proxy.Hooks
	sc, err := New(cfg)
	if err != nil {
		logger.Error("cannot start capture and injection; relaying only", "server", name, "err", err)
	} else {
		hooks = sc.Hooks
		defer func() {
			t := time.Now()
			sc.Close()
			logger.Info("sidecar closed", "server", name, "took", time.Since(t).Round(time.Millisecond).String())
		}()
	}
	st.Server, st.Hooks, st.Logger = name, hooks, logger
	if sc != nil {
		sc.CountServer(st)
	}
	start := time.Now()
	logger.Info("wrap starting", "server", name, "command", append([]string{st.Command}, st.Args...), "pid", os.Getpid(), "host_pid", os.Getppid())
	err = st.Run(ctx, in, out)
	if err != nil {
		logger.Error("wrap stopped", "server", name, "err", err, "ran", time.Since(start).Round(time.Millisecond).String())
		return fmt.Errorf("wrap %s: %w", name, err)
	}
	logger.Info("wrap stopped", "server", name, "ran", time.Since(start).Round(time.Millisecond).String())
	return nil
}
