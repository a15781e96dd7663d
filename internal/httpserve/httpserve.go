// Package httpserve runs an http.Server until its context ends, the way
// every HTTP endpoint of Hindsight stops: a graceful shutdown bounded by
// ShutdownTimeout, then a hard close.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ShutdownTimeout bounds a graceful shutdown: requests still running after
// it are cut.
const ShutdownTimeout = 5 * time.Second

// Serve serves hs on ln until ctx is done, then shuts hs down gracefully
// (within ShutdownTimeout, then closes it). It returns nil after a shutdown
// that ctx asked for, and the server's error, wrapped, when serving failed.
func Serve(ctx context.Context, hs *http.Server, ln net.Listener) error {
	return ServeClosing(ctx, hs, ln, nil)
}

// ServeClosing is Serve that calls closing (when not nil) once ctx is
// done, before the shutdown: to end what would hold it, such as open
// event streams.
func ServeClosing(ctx context.Context, hs *http.Server, ln net.Listener, closing func()) error {
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	if closing != nil {
		closing()
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	<-served
	return nil
}
