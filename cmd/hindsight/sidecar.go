package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// sidecar is what runs beside the proxy in `wrap` and `serve`: capture and
// its outbox, and injection. Transports take Hooks from it and call Close
// when they stop, which drains what is still queued.
type sidecar struct {
	Hooks   *proxy.Hooks
	closers []func()

	client *daemon.Client
	keeper *daemonKeeper
	logger *slog.Logger

	mu       sync.Mutex
	sessions map[string]bool // sessions seen → ended
}

// sessionCloseTimeout bounds telling the daemon that sessions ended.
const sessionCloseTimeout = 3 * time.Second

// newSidecar builds the sidecar for the server called name, speaking
// transport ("stdio", "streamable-http", "sse").
//
// It never blocks on the daemon: the daemon is started in the background
// when none answers, and capture's outbox buffers steps meanwhile.
func newSidecar(ctx context.Context, g *globals, name, transport string, logger *slog.Logger) (*sidecar, error) {
	s := &sidecar{
		Hooks:    &proxy.Hooks{},
		client:   daemon.NewClient(g.home.Socket()),
		logger:   logger,
		sessions: map[string]bool{},
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s.keeper = startKeeper(g, exe, s.client, logger)
	s.closers = append(s.closers, s.keeper.stop, s.closeSessions)

	// The exchange hook notes every session that carried traffic, so the
	// daemon hears when each ends. Capture's recorder chains after it.
	s.Hooks.Exchange = s.noteSession

	// Injection goes last: its Exchange hook records what it injected
	// before the hooks set above (capture's recorder) see the exchange.
	installInjector(g, name, s.client, s.Hooks, logger)
	return s, nil
}

// deliverer is the daemon client as capture's outbox sees it: a failed
// delivery wakes the keeper, which restarts a daemon that died.
type deliverer struct {
	c *daemon.Client
	k *daemonKeeper
}

func (d deliverer) Deliver(ctx context.Context, steps []hindsight.Step) error {
	err := d.c.Deliver(ctx, steps)
	if err != nil && !errors.Is(err, daemon.ErrRejected) && ctx.Err() == nil {
		d.k.wake()
	}
	return err
}

func (s *sidecar) noteSession(ex *proxy.Exchange) {
	if ex.Session == nil || ex.Session.ID == "" {
		return
	}
	s.mu.Lock()
	if _, ok := s.sessions[ex.Session.ID]; !ok {
		s.sessions[ex.Session.ID] = false
	}
	s.mu.Unlock()
}

// EndSession tells the daemon that session id ended (an HTTP session
// deleted or expired); its task may then be final. Close does this for
// every session still open.
func (s *sidecar) EndSession(ctx context.Context, id string) {
	s.mu.Lock()
	ended, seen := s.sessions[id]
	s.sessions[id] = true
	s.mu.Unlock()
	if ended || !seen {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sessionCloseTimeout)
	defer cancel()
	if _, err := s.client.CloseSession(ctx, id, "", nil); err != nil {
		// The task still ends by the idle gap.
		s.logger.Warn("tell the daemon a session ended", "session", id, "err", err)
	}
}

// closeSessions ends every session this sidecar saw. It runs after
// capture's final drain, so the daemon has the sessions' steps first.
func (s *sidecar) closeSessions() {
	s.mu.Lock()
	var open []string
	for id, ended := range s.sessions {
		if !ended {
			open = append(open, id)
		}
	}
	s.mu.Unlock()
	for _, id := range open {
		s.EndSession(context.Background(), id)
	}
}

// Close stops the sidecar's background work after a final drain, in the
// reverse order of start.
func (s *sidecar) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// daemonKeeper starts the daemon in the background when none answers: at
// start, and again when a delivery fails (at most once per keeperPause).
type daemonKeeper struct {
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// keeperPause spaces restart attempts.
const keeperPause = 5 * time.Second

func startKeeper(g *globals, exe string, c *daemon.Client, logger *slog.Logger) *daemonKeeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &daemonKeeper{kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	k.wake()
	go func() {
		defer close(k.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.kick:
			}
			if _, err := daemon.EnsureRunning(ctx, g.home, exe, daemonArgs(g)...); err != nil && ctx.Err() == nil {
				logger.Warn("daemon not reachable; steps wait in the outbox", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(keeperPause):
			}
		}
	}()
	return k
}

func (k *daemonKeeper) wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *daemonKeeper) stop() {
	k.cancel()
	<-k.done
}
