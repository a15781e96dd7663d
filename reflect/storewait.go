package reflect

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hindsight-proxy/hindsight"
)

// Defaults of the wait while the experience store is unreachable.
const (
	DefaultStoreWaitBase = 5 * time.Second
	DefaultStoreWaitMax  = 5 * time.Minute
)

// storeWait holds reflection back while the experience store is
// unreachable: a task whose reflection failed for that reason stays
// pending without counting an attempt, and no task is reflected until the
// wait is over and the store answers a probe (so that no LLM call is spent
// on a lesson that cannot be stored yet). The wait doubles from base up to
// max while the store stays away.
type storeWait struct {
	mu    sync.Mutex
	b     *backoff.ExponentialBackOff
	until time.Time // zero: the store answered last time
}

func newStoreWait(base, max time.Duration) *storeWait {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = base, max, 0
	b.Multiplier = 2
	b.Reset()
	return &storeWait{b: b}
}

// down records that the store was unreachable at now and returns how
// long reflection waits.
func (w *storeWait) down(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.b.NextBackOff()
	w.until = now.Add(d)
	return d
}

// up records that the store answered and reports whether it was down.
func (w *storeWait) up() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	was := !w.until.IsZero()
	w.b.Reset()
	w.until = time.Time{}
	return was
}

// state returns how long reflection still waits at now (0: not) and
// whether the store was down when last tried.
func (w *storeWait) state(now time.Time) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.until.IsZero() {
		return 0, false
	}
	return max(w.until.Sub(now), 0), true
}

// storeUnavailable reports whether err says the experience store could
// not be reached.
func storeUnavailable(err error) bool { return errors.Is(err, hindsight.ErrStoreUnavailable) }

// probeStore asks the store for an id that does not exist: any answer
// but an unreachable store will do.
func (q *Queue) probeStore(ctx context.Context) error {
	if q.Pipeline == nil || q.Pipeline.Merger == nil || q.Pipeline.Merger.Store == nil {
		return nil
	}
	_, err := q.Pipeline.Merger.Store.Get(ctx, q.Pipeline.Merger.namespace(), "hindsight-store-probe")
	if storeUnavailable(err) {
		return err
	}
	return nil
}

// storeWait returns the queue's wait for an unreachable store.
func (q *Queue) storeWait() *storeWait {
	q.sw.once.Do(func() {
		base, max := q.StoreWaitBase, q.StoreWaitMax
		if base <= 0 {
			base = DefaultStoreWaitBase
		}
		if max <= 0 {
			max = DefaultStoreWaitMax
		}
		q.sw.wait = newStoreWait(base, max)
	})
	return q.sw.wait
}

// waitForStore reports, when the store was unreachable last time, how
// long the worker still waits: the rest of the backoff, else (with tasks
// pending) until a probe of the store answers.
func (q *Queue) waitForStore(ctx context.Context, pending bool) (time.Duration, bool) {
	sw := q.storeWait()
	wait, down := sw.state(q.now())
	switch {
	case !down:
		return 0, false
	case wait > 0:
		return wait, true
	case !pending:
		return 0, false
	}
	if err := q.probeStore(ctx); err != nil {
		return sw.down(q.now()), true
	}
	return 0, false // the task's success or failure settles the wait
}
