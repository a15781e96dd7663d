package main

import (
	"context"
	"log/slog"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// sidecar is what runs beside the proxy in `wrap` and `serve`: capture and
// its outbox, and injection. Transports take Hooks from it and call Close
// when they stop, which drains what is still queued.
type sidecar struct {
	Hooks   *proxy.Hooks
	closers []func()
}

// newSidecar builds the sidecar for the server called name, speaking
// transport ("stdio", "streamable-http", "sse").
func newSidecar(ctx context.Context, g *globals, name, transport string, logger *slog.Logger) (*sidecar, error) {
	s := &sidecar{Hooks: &proxy.Hooks{}}
	return s, nil
}

// Close stops the sidecar's background work after a final drain, in the
// reverse order of start.
func (s *sidecar) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}
