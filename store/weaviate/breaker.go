package weaviate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// probeTimeout bounds one readiness probe.
const probeTimeout = time.Second

// probeEvery spaces the probes of an open breaker.
const probeEvery = time.Second

// errNoAnswer is the probe's error when Weaviate did not answer at all
// (refused, reset or timed-out connection), as opposed to errNotReady.
var errNoAnswer = errors.New("weaviate does not answer")

// breaker fails calls at once while Weaviate is known to be unreachable,
// until a readiness probe says it answers again.
//
// It is closed (calls go through) until trip opens it. While it is open,
// allow fails with hindsight.ErrStoreUnavailable without a request, except
// that a call finding no probe in flight and none in the last every runs
// one: when Weaviate answers ready the breaker closes and that call goes
// through.
type breaker struct {
	// probe returns nil when Weaviate is ready, errNotReady when it
	// answers but is not ready, else an error wrapping errNoAnswer.
	probe func(ctx context.Context) error
	now   func() time.Time
	every time.Duration

	mu      sync.Mutex
	open    bool
	probing bool
	last    time.Time // of the last probe, or the opening
	reason  error     // why it opened, or the last probe's error
}

// allow returns nil when a call may go to Weaviate, else an error wrapping
// hindsight.ErrStoreUnavailable, or ctx's error when it has ended.
func (b *breaker) allow(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if !b.open {
		b.mu.Unlock()
		return nil
	}
	if b.probing || b.now().Sub(b.last) < b.every {
		err := b.reason
		b.mu.Unlock()
		return b.unavailable(err)
	}
	b.probing, b.last = true, b.now()
	b.mu.Unlock()

	err := b.probe(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if err == nil {
		b.open, b.reason = false, nil
		return nil
	}
	if ctx.Err() == nil { // the caller's own end says nothing of Weaviate
		b.reason = err
	}
	return b.unavailable(err)
}

// trip opens the breaker when err (a call's error) means Weaviate is
// unreachable and a probe finds it does not answer at all; it returns
// whether the breaker is open. A Weaviate that answers, even "not ready"
// (starting, or a cluster that recovers by itself), leaves it closed: the
// call's retry goes on.
func (b *breaker) trip(ctx context.Context, err error) bool {
	if !errors.Is(err, hindsight.ErrStoreUnavailable) && !unreachable(ctx, err) {
		return false
	}
	b.mu.Lock()
	if b.open {
		b.mu.Unlock()
		return true
	}
	b.mu.Unlock()
	perr := b.probe(ctx)
	if perr == nil || !errors.Is(perr, errNoAnswer) || ctx.Err() != nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open, b.last, b.reason = true, b.now(), perr
	return true
}

// openAfter opens the breaker for a call that ended unavailable (its
// retry ran out): later calls fail at once until a probe says ready.
func (b *breaker) openAfter(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		b.open, b.last, b.reason = true, b.now(), err
	}
}

// isOpen reports whether calls fail at once.
func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

func (b *breaker) unavailable(reason error) error {
	if reason == nil {
		reason = errNoAnswer
	}
	return fmt.Errorf("%w: weaviate is unreachable, not asked again until it answers ready: %w",
		hindsight.ErrStoreUnavailable, reason)
}

// probeReady asks Weaviate's readiness endpoint, within probeTimeout.
func (s *Store) probeReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	ok, err := s.c.Misc().ReadyChecker().Do(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", errNoAnswer, err)
	case !ok:
		return errNotReady
	}
	return nil
}
