package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/spool"
)

// keeper starts the daemon in the background when none answers: at
// start, and again when a delivery fails (at most once per KeeperPause).
type keeper struct {
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// drain, when set, runs each time the daemon was found answering:
	// it delivers outboxes left by dead sidecars.
	drain func(ctx context.Context)
}

// KeeperPause spaces the attempts to start a daemon that does not answer.
const KeeperPause = 5 * time.Second

func newKeeper() *keeper {
	return &keeper{kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// start runs the keeper until stop: exe is the executable that runs the
// daemon, with args before its `daemon`.
func (k *keeper) start(home hindsight.Home, exe string, args []string, logger *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	k.wake()
	go func() {
		defer close(k.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.kick:
			}
			_, err := daemon.EnsureRunning(ctx, home, exe, args...)
			switch {
			case err == nil:
				if k.drain != nil {
					k.drain(ctx)
				}
			case ctx.Err() == nil:
				logger.Warn("daemon not reachable; steps wait in the outbox", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(KeeperPause):
			}
		}
	}()
}

func (k *keeper) wake() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

func (k *keeper) stop() {
	k.cancel()
	<-k.done
}

// deliverer is the daemon client as capture's outbox sees it: a failed
// delivery wakes the keeper, which restarts a daemon that died.
type deliverer struct {
	c *daemon.Client
	k *keeper
}

// DeliverEnd tells the daemon an end noted in the outbox (spool.Ender): a
// task the agent ended, or a session closed after its LastSeq step.
func (d deliverer) DeliverEnd(ctx context.Context, source string, e spool.End) error {
	if e.Final {
		_, err := d.c.FinalTask(ctx, daemon.FinalRequest{TaskID: e.TaskID, SessionID: e.SessionID})
		if errors.Is(err, hindsight.ErrNotFound) {
			return nil // its steps never arrived: nothing to end
		}
		return err
	}
	var last *uint64
	if e.LastSeq == 0 {
		source = "" // no step: the session is closed at once
	} else {
		last = &e.LastSeq
	}
	_, err := d.c.CloseSession(ctx, e.SessionID, source, last)
	return err
}

func (d deliverer) Deliver(ctx context.Context, steps []hindsight.Step) error {
	return d.failed(ctx, d.c.Deliver(ctx, steps))
}

// DeliverRaw sends steps as the outbox stores them (spool.RawDeliverer).
func (d deliverer) DeliverRaw(ctx context.Context, steps []json.RawMessage) error {
	return d.failed(ctx, d.c.DeliverRaw(ctx, steps))
}

// failed wakes the keeper when a delivery did not reach the daemon, and
// returns err as the outbox reads it (SpoolError).
func (d deliverer) failed(ctx context.Context, err error) error {
	if err != nil && !errors.Is(err, daemon.ErrRejected) && ctx.Err() == nil {
		d.k.wake()
	}
	return SpoolError(err)
}

// SpoolError maps the daemon's refusal of a batch to the spool's
// (spool.ErrRejected), so the outbox sets the refused steps aside instead
// of retrying them for ever, and a daemon short of disk space
// (daemon.ErrDiskFull) to spool.ErrDaemonFull, so the outbox tries again
// within a second. Other errors, and nil, are returned as they are.
func SpoolError(err error) error {
	if errors.Is(err, daemon.ErrDiskFull) && !errors.Is(err, spool.ErrDaemonFull) {
		return fmt.Errorf("%w: %w", spool.ErrDaemonFull, err)
	}
	if err != nil && errors.Is(err, daemon.ErrRejected) && !errors.Is(err, spool.ErrRejected) {
		return fmt.Errorf("%w: %w", spool.ErrRejected, err)
	}
	return err
}

// Unreachable reports an error of a daemon that did not answer (not one
// it answered).
func Unreachable(err error) bool {
	var ae *daemon.APIError
	return !errors.As(err, &ae)
}
