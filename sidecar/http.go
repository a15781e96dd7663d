package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight/internal/httpserve"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// HTTP is where the HTTP sidecar listens and what it relays to.
type HTTP struct {
	// Listen is the address (host:port) to serve on.
	Listen string
	// Front holds the front door's settings (token, hosts, origins,
	// limits, task id); Serve sets its Upstream, Server, Hooks, Logger
	// and SessionEnded.
	Front *proxy.HTTPHandler
	// Command, when set, is the server's command line, run once per
	// session; else URL is the server's, reached over UpstreamTransport
	// with Header on every request.
	Command           []string
	URL               string
	UpstreamTransport string
	Header            http.Header
	// Target names the upstream in the log and to Ready (redacted: a URL
	// or command line may carry a secret).
	Target string
	// Ready, when set, is told the address once the sidecar listens.
	Ready func(addr net.Addr)
}

// Serve is the HTTP sidecar (`hindsight serve`): Streamable HTTP at /mcp
// and legacy SSE at /sse in front of h's upstream, with the sidecar of
// cfg, until ctx ends or the listener fails. It then ends the sessions
// (their tasks' ends told the daemon), stops serving and closes the
// sidecar.
func Serve(ctx context.Context, cfg Config, h HTTP) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	logger := cfg.Logger
	cfg.Transport = "streamable-http"
	sc, err := New(cfg)
	if err != nil {
		return fmt.Errorf("start sidecar: %w", err)
	}
	defer sc.Close()

	front := h.Front
	front.Upstream, front.Server, front.Hooks, front.Logger = h.upstream(cfg), cfg.Server, sc.Hooks, logger
	// A session's end makes its task final at once, not after the idle
	// gap.
	front.SessionEnded = func(s *proxy.Session) { sc.EndSession(context.Background(), s.ID) }
	sc.mu.Lock()
	sc.refused = front.BodiesRefused // reported with the outbox's stats
	sc.mu.Unlock()
	ln, err := net.Listen("tcp", h.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Bodies are bounded per request (BodyTimeout), not by ReadTimeout,
	// which would also end the long-lived event streams.
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	logger.Info("serving", "addr", ln.Addr().String(), "upstream", h.Target, "transport", h.UpstreamTransport)
	if h.Ready != nil {
		h.Ready(ln.Addr())
	}

	// End the sessions first: their open streams would hold the shutdown.
	closeFront := sync.OnceValue(front.Close)
	err = httpserve.ServeClosing(ctx, srv, ln, func() {
		logger.Info("shutting down", "reason", context.Cause(ctx))
		closeFront()
	})
	closeFront()
	if n := front.BodiesRefused(); n > 0 {
		logger.Warn("requests refused over the body budget", "refused", n, "budget_bytes", front.BodyBudget)
	}
	return err
}

// upstream is the server h relays to: its command, one process per
// session, else its URL.
func (h HTTP) upstream(cfg Config) proxy.Upstream {
	if len(h.Command) > 0 {
		return &proxy.CommandUpstream{Path: h.Command[0], Args: h.Command[1:], Server: cfg.Server, Logger: cfg.Logger}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64 // every agent session talks to the same host
	return &proxy.HTTPUpstream{
		URL: h.URL, Transport: h.UpstreamTransport, Header: h.Header, Logger: cfg.Logger,
		Client: &http.Client{Transport: tr},
	}
}
