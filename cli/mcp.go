package cli

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/internal/httpserve"
	"github.com/hindsight-proxy/hindsight/memserver"
	"github.com/hindsight-proxy/hindsight/sidecar"
	"github.com/mark3labs/mcp-go/server"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func mcpCmd(g *globals) *cobra.Command {
	c := leaf("mcp [--listen ADDR [--auth-token T]] [--writes-per-minute N]",
		"the memory as an MCP server (store_episode, trigger_hindsight, query_hindsight…)",
		"  hindsight mcp\n  hindsight mcp --listen 127.0.0.1:8932")
	fs := c.Flags()
	listen := fs.String("listen", "", "serve Streamable HTTP at http://ADDR/mcp instead of stdio")
	token := fs.String("auth-token", os.Getenv("HINDSIGHT_AUTH_TOKEN"), "bearer token clients must present over HTTP (default $HINDSIGHT_AUTH_TOKEN); required for a non-loopback --listen")
	writes := fs.Int("writes-per-minute", memserver.DefaultWritesPerMinute, "store_episode and trigger_hindsight calls allowed per session and minute (negative: no limit)")
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, pos []string) error {
		return runMCP(ctx, g, pos, listen, token, writes)
	})
}

// runMCP is `hindsight mcp [--listen ADDR [--auth-token T]]`: the memory
// as an MCP server (package memserver), on stdio or, with --listen, over
// Streamable HTTP at /mcp. It talks to the daemon, starting it when none
// answers. Logs go to $HINDSIGHT_HOME/logs/mcp.log.
func runMCP(ctx context.Context, g *globals, pos []string, listen, token *string, writes *int) error {
	if len(pos) > 0 {
		return fmt.Errorf("%w: mcp takes no arguments", errUsage)
	}
	if *listen != "" && !isLoopback(*listen) && *token == "" {
		return fmt.Errorf("%w: refusing to listen on %s, which is not a loopback address, without --auth-token: the memory holds your agents' trajectories", errUsage, *listen)
	}
	logger, closer, err := openLog(g, "mcp")
	if err != nil {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		logger.Error("cannot open the log file; logging to stderr", "err", err)
	} else {
		defer closer.Close()
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	d := &autoDaemon{Client: daemon.NewClient(g.home.Socket()), ensure: func(ctx context.Context) error {
		_, err := daemon.EnsureRunning(ctx, g.home, exe, daemonArgs(g)...)
		return err
	}}
	// Start the daemon now, so the first call does not wait for it.
	go func() {
		if err := d.start(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("daemon not reachable yet", "err", err)
		}
	}()
	srv := memserver.New(memserver.Options{Daemon: d, Namespace: g.config.Store.Namespace, Version: shortVersion(),
		WritesPerMinute: *writes, Logger: logger})
	defer func() {
		// The episodes' tasks end with their client (see memserver.Close).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpCloseTimeout)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			logger.Warn("end the tasks of the episodes; they end by the idle gap", "err", err)
		}
	}()

	if *listen == "" {
		logger.Info("mcp starting on stdio", "pid", os.Getpid())
		st := server.NewStdioServer(srv.MCP())
		st.SetErrorLogger(slog.NewLogLogger(logger.Handler(), slog.LevelWarn))
		err := st.Listen(ctx, os.Stdin, os.Stdout)
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("serve mcp on stdio: %w", err)
		}
		return nil
	}
	return serveMCPHTTP(ctx, g, srv, *listen, *token, logger)
}

// mcpCloseTimeout bounds ending the episodes' tasks when `hindsight mcp`
// stops.
const mcpCloseTimeout = 10 * time.Second

// serveMCPHTTP serves the memory over Streamable HTTP at /mcp until ctx
// ends. With token set, every request must carry it as a bearer token.
func serveMCPHTTP(ctx context.Context, g *globals, srv *memserver.Server, addr, token string, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	var h http.Handler = server.NewStreamableHTTPServer(srv.MCP(), server.WithEndpointPath("/mcp"), server.WithStreamableHTTPLogger(logger))
	if token != "" {
		h = requireBearer(token, h)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	g.info("hindsight mcp: listening on http://%s/mcp", ln.Addr())
	logger.Info("mcp starting over HTTP", "addr", ln.Addr().String(), "auth", token != "")
	if err := httpserve.Serve(ctx, hs, ln); err != nil {
		return fmt.Errorf("serve mcp over HTTP: %w", err)
	}
	return nil
}

// requireBearer answers 401 to a request without "Authorization: Bearer
// token".
func requireBearer(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hindsight"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// autoDaemon is the daemon's client for `hindsight mcp`: a call that does
// not reach the daemon starts it (at most once per sidecar.KeeperPause) and is
// tried again.
type autoDaemon struct {
	*daemon.Client
	ensure func(ctx context.Context) error

	mu      sync.Mutex
	last    time.Time // when the last start ended
	lastErr error
}

func (a *autoDaemon) start(ctx context.Context) error {
	// One start at a time; calls that wait for it share its outcome for
	// sidecar.KeeperPause.
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.last.IsZero() && time.Since(a.last) < sidecar.KeeperPause {
		return a.lastErr
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	a.lastErr = a.ensure(ctx)
	a.last = time.Now()
	return a.lastErr
}

// retry runs f, and again once the daemon is started when f did not
// reach it.
func retry[T any](ctx context.Context, a *autoDaemon, f func() (T, error)) (T, error) {
	v, err := f()
	if err == nil || !sidecar.Unreachable(err) || ctx.Err() != nil {
		return v, err
	}
	if a.start(ctx) != nil {
		return v, err
	}
	return f()
}

func (a *autoDaemon) StoreEpisode(ctx context.Context, e daemon.Episode) (*daemon.EpisodeResult, error) {
	return retry(ctx, a, func() (*daemon.EpisodeResult, error) { return a.Client.StoreEpisode(ctx, e) })
}

func (a *autoDaemon) FinalTask(ctx context.Context, req daemon.FinalRequest) (*daemon.FinalResult, error) {
	return retry(ctx, a, func() (*daemon.FinalResult, error) { return a.Client.FinalTask(ctx, req) })
}

func (a *autoDaemon) Tasks(ctx context.Context, f daemon.TaskFilter) ([]hindsight.Task, error) {
	return retry(ctx, a, func() ([]hindsight.Task, error) { return a.Client.Tasks(ctx, f) })
}

func (a *autoDaemon) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	return retry(ctx, a, func() (*hindsight.Task, error) { return a.Client.Task(ctx, id) })
}

func (a *autoDaemon) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	return retry(ctx, a, func() ([]hindsight.ScoredExperience, error) { return a.Client.Search(ctx, q) })
}
