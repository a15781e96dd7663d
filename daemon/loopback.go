package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hindsight-proxy/hindsight/internal/httpserve"
)

// IsLoopbackHost reports whether host (a name or an IP literal, without a
// port) names this machine's loopback: "localhost", 127.0.0.0/8 or ::1.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrNotLoopback refuses a TCP address that is not on loopback.
var ErrNotLoopback = errors.New("not a loopback address")

// ListenTCP listens on addr ("127.0.0.1:0" when empty; a missing host is
// 127.0.0.1). Unless allowRemote is set, a host that is not loopback is
// refused with ErrNotLoopback.
func ListenTCP(addr string, allowRemote bool) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !allowRemote && !IsLoopbackHost(host) {
		return nil, fmt.Errorf("listen on %q: %w (allow it explicitly to listen elsewhere)", addr, ErrNotLoopback)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", addr, err)
	}
	return ln, nil
}

// ServeMetrics serves reg's metrics at GET /metrics on ln until ctx is
// done. It is the daemon's --metrics-listen endpoint: the registry the
// socket serves, over TCP for a Prometheus that cannot reach the socket.
func ServeMetrics(ctx context.Context, ln net.Listener, reg *prometheus.Registry, logger *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	if err := httpserve.Serve(ctx, hs, ln); err != nil {
		return fmt.Errorf("serve metrics: %w", err)
	}
	return nil
}
