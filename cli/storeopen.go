package cli

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

// Waits between tries to open an experience store that was unreachable
// when the daemon started: doubling from the first, capped at the second.
const (
	storeOpenBackoff    = time.Second
	storeOpenMaxBackoff = time.Minute
)

// openOrPending opens the store with open, or, when it is unreachable
// (an error wrapping hindsight.ErrStoreUnavailable), returns a
// store.Pending at once and keeps trying in the background until open
// succeeds, ctx ends or the Pending is closed. Any other error is
// returned: a store that answers no will not answer yes later.
func openOrPending(ctx context.Context, emb hindsight.Embedder, logger *slog.Logger,
	open func(context.Context) (hindsight.ExperienceStore, error)) (hindsight.ExperienceStore, error) {
	st, err := open(ctx)
	if err == nil || !errors.Is(err, hindsight.ErrStoreUnavailable) {
		return st, err
	}
	logger.Warn("experience store unreachable; opening it in the background (reads answer 503, writes are queued)", "err", err)
	p := store.NewPending(emb)
	p.Failed(err)
	go openLater(ctx, p, logger, open)
	return p, nil
}

// openLater tries open with capped backoff and hands p what it opens.
func openLater(ctx context.Context, p *store.Pending, logger *slog.Logger,
	open func(context.Context) (hindsight.ExperienceStore, error)) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.Multiplier, b.MaxElapsedTime = storeOpenBackoff, storeOpenMaxBackoff, 2, 0
	b.Reset()
	for tries := 1; ; tries++ {
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if p.Closed() {
			return
		}
		st, err := open(ctx)
		if err != nil {
			p.Failed(err)
			if errors.Is(err, hindsight.ErrStoreUnavailable) {
				logger.Debug("experience store still unreachable", "err", err, "try", tries)
			} else {
				logger.Error("open experience store", "err", err, "try", tries)
			}
			continue
		}
		if !p.Set(st) {
			if err := st.Close(); err != nil {
				logger.Warn("close experience store", "err", err)
			}
			return
		}
		logger.Info("experience store opened", "tries", tries+1)
		return
	}
}
