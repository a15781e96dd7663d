package reflect

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
)

// Start runs the worker in the background until Close.
func (q *Queue) Start(ctx context.Context) {
	loopCtx, stop := context.WithCancel(ctx)
	// The work context outlives the loop's by DrainTimeout, so a task in
	// flight at shutdown can finish.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	q.worker.stop = stop
	q.worker.done = make(chan struct{})
	go func() {
		defer close(q.worker.done)
		defer cancelWork()
		go func() {
			<-loopCtx.Done()
			drain := q.DrainTimeout
			if drain <= 0 {
				drain = DefaultDrainTimeout
			}
			t := time.NewTimer(drain)
			defer t.Stop()
			select {
			case <-t.C:
				cancelWork()
			case <-workCtx.Done():
			}
		}()
		q.loop(loopCtx, workCtx)
	}()
}

// Close stops the worker, letting a task in flight finish for up to
// DrainTimeout (then it is cancelled and stays pending), and closes the
// database if the queue opened it.
func (q *Queue) Close() error {
	if q.worker.stop != nil {
		q.worker.stop()
		<-q.worker.done
	}
	if q.entries.own {
		return q.entries.db.Close()
	}
	return nil
}

// loop is the worker: it reflects on due pending tasks, then sleeps until
// the next is due (at most the poll interval) or a task is enqueued; with
// nothing pending, until a task is enqueued. Errors of the queue itself
// back off exponentially, capped.
func (q *Queue) loop(loopCtx, workCtx context.Context) {
	poll := q.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	failures := 0
	for {
		wait, err := q.work(loopCtx, workCtx)
		switch {
		case loopCtx.Err() != nil:
			return
		case err != nil:
			failures++
			wait = min(time.Duration(1<<min(failures, 10))*time.Second, 5*time.Minute)
			q.logError("reflect: queue error", err, "retry_in", wait)
		default:
			failures = 0
		}
		if wait == idle { // nothing pending: only Enqueue has work
			select {
			case <-loopCtx.Done():
				return
			case <-q.worker.wake:
			}
			continue
		}
		wait = min(max(wait, min(time.Second, poll)), poll)
		t := time.NewTimer(wait)
		select {
		case <-loopCtx.Done():
			t.Stop()
			return
		case <-q.worker.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// idle is what work returns when no task is pending.
const idle = time.Duration(-1 << 63)

// work reflects on every due pending task and returns how long until the
// next one is due (0: look again soon; idle: none is pending).
func (q *Queue) work(loopCtx, workCtx context.Context) (time.Duration, error) {
	entries, err := q.List(loopCtx, StatePending)
	if err != nil {
		return 0, err
	}
	if wait, ok := q.waitForStore(loopCtx, len(entries) > 0); ok {
		return wait, nil
	}
	var next time.Time
	retried := false // a task failed: it waits for a retry not in next
	for _, e := range entries {
		if loopCtx.Err() != nil {
			return 0, nil
		}
		now := q.now()
		if e.NextAttempt.After(now) {
			if next.IsZero() || e.NextAttempt.Before(next) {
				next = e.NextAttempt
			}
			continue
		}
		err := q.process(loopCtx, workCtx, e.TaskID, false)
		var be *BudgetError
		if errors.As(err, &be) {
			return be.Until.Sub(q.now()), nil
		}
		if storeUnavailable(err) {
			wait, _ := q.storeWait().state(q.now())
			return wait, nil
		}
		if err != nil && !isTaskError(err) {
			return 0, err
		}
		retried = retried || err != nil
	}
	switch {
	case retried:
		return 0, nil // look again soon (the loop waits at least a second, or the poll interval)
	case next.IsZero():
		return idle, nil
	}
	return next.Sub(q.now()), nil
}

// credit gives the lessons that helped task their hits, unless an earlier
// reflection of the task already did. It reports whether the task's hits
// are now counted. A failure is logged, not retried: the lessons are
// stored, and a lost hit only lowers a rank.
//
// An unreachable store is returned instead: the task waits for it, so
// that its hits are counted late rather than never.
func (q *Queue) credit(ctx context.Context, task *hindsight.Task) (bool, error) {
	if e, err := q.Entry(ctx, task.ID); err == nil && e.Credited {
		return true, nil
	}
	if err := q.Pipeline.Credit(ctx, task); err != nil {
		if storeUnavailable(err) {
			return false, err
		}
		q.logger().Warn("reflect: credit lessons", "task", task.ID, "err", err)
		return false, nil
	}
	return true, nil
}

// taskError marks an error that concerns one task and is already recorded
// on its entry, as opposed to an error of the queue itself.
type taskError struct{ err error }

func (e *taskError) Error() string { return e.err.Error() }
func (e *taskError) Unwrap() error { return e.err }

func isTaskError(err error) bool {
	var te *taskError
	return errors.As(err, &te)
}

// process reflects on one task and records the outcome. Cancellation and
// an exhausted budget leave the task pending without counting an attempt.
//
// Unless force is set (RunNow), a task that is no longer due when its turn
// comes (RunNow got to it first) is skipped.
func (q *Queue) process(loopCtx, workCtx context.Context, id string, force bool) error {
	q.worker.procMu.Lock()
	defer q.worker.procMu.Unlock()
	if err := loopCtx.Err(); err != nil {
		return err
	}
	if !force {
		e, err := q.Entry(loopCtx, id)
		if err != nil {
			return err
		}
		if e.State != StatePending || e.NextAttempt.After(q.now()) {
			return nil
		}
	}
	m := q.metrics()
	q.worker.running.Add(1)
	defer q.worker.running.Add(-1)
	task, err := q.Source.Task(workCtx, id)
	var out *Outcome
	credited := false
	if err == nil {
		out, err = q.Pipeline.Process(workCtx, task)
		if err == nil {
			credited, err = q.credit(workCtx, task)
		}
	} else {
		err = fmt.Errorf("load task %s: %w", id, err)
	}
	q.status.mu.Lock()
	q.status.lastRun = q.now().UTC()
	q.status.mu.Unlock()
	switch {
	case err == nil:
	case workCtx.Err() != nil:
		q.logger().Info("reflect: task interrupted; stays pending", "task", id)
		return workCtx.Err()
	case errors.Is(err, ErrBudget):
		q.logger().Warn("reflect: hourly LLM budget reached; task waits", "task", id, "err", err)
		return err
	case storeUnavailable(err):
		wait := q.storeWait().down(q.now())
		q.status.mu.Lock()
		q.status.lastErr = fmt.Sprintf("task %s waits for the experience store (next try in %s): %v", id, wait.Round(time.Second), err)
		q.status.mu.Unlock()
		m.task("store_wait")
		q.logger().Warn("reflect: experience store unreachable; task waits without counting an attempt", "task", id, "retry_in", wait, "err", err)
		return err
	}
	if q.storeWait().up() {
		q.status.mu.Lock()
		q.status.lastErr = "" // the store is back: its wait is no longer news
		q.status.mu.Unlock()
	}
	return q.record(workCtx, id, out, credited, err)
}

// record writes the outcome of a task's reflection on its entry: done
// (err nil), or pending for a retry, or failed after MaxAttempts.
func (q *Queue) record(ctx context.Context, id string, out *Outcome, credited bool, err error) error {
	m := q.metrics()
	var recErr error
	var failed bool
	uerr := q.update(func(txn *badger.Txn) error {
		e, gerr := q.get(txn, id)
		if gerr != nil {
			return gerr
		}
		now := q.now().UTC()
		if e == nil {
			e = &Entry{TaskID: id, EnqueuedAt: now}
		}
		old := e.State
		e.UpdatedAt = now
		if err == nil {
			e.State, e.LastError, e.NextAttempt = StateDone, "", time.Time{}
			e.Credited = e.Credited || credited
			e.Experiences = nil
			e.Rejected = rejections(out.Dropped)
			for _, r := range out.Merged {
				if r.Outcome != DropStale && r.Outcome != DropContested {
					e.Experiences = append(e.Experiences, r.ID)
				}
			}
			return q.put(txn, old, e)
		}
		e.Attempts++
		e.LastError = err.Error()
		max := q.MaxAttempts
		if max <= 0 {
			max = DefaultMaxAttempts
		}
		failed = e.Attempts >= max
		if failed {
			e.State, e.NextAttempt = StateFailed, time.Time{}
			recErr = fmt.Errorf("task %s failed after %d attempts: %w", id, e.Attempts, err)
		} else {
			e.State, e.NextAttempt = StatePending, now.Add(q.retryDelay(e.Attempts))
			recErr = fmt.Errorf("task %s (attempt %d of %d, next at %s): %w", id, e.Attempts, max, e.NextAttempt.Format(time.RFC3339), err)
		}
		return q.put(txn, old, e)
	})
	if uerr != nil {
		return fmt.Errorf("record reflection of task %s: %w", id, uerr)
	}
	if err == nil {
		m.task(StateDone)
		q.notify(ctx, id, StateDone)
		return nil
	}
	q.status.mu.Lock()
	q.status.lastErr = recErr.Error()
	q.status.mu.Unlock()
	if failed {
		m.task(StateFailed)
		q.notify(ctx, id, StateFailed)
		q.logger().Error("reflect: task marked failed", "task", id, "err", err)
	} else {
		m.task("retry")
		q.logger().Warn("reflect: task reflection failed; will retry", "task", id, "err", recErr)
	}
	return &taskError{recErr}
}

// retryDelay grows exponentially from RetryBase, capped at RetryMax, with
// jitter so tasks failing together do not retry together.
func (q *Queue) retryDelay(attempts int) time.Duration {
	base, cap := q.RetryBase, q.RetryMax
	if base <= 0 {
		base = DefaultRetryBase
	}
	if cap <= 0 {
		cap = DefaultRetryMax
	}
	d := base << min(attempts-1, 20)
	if d <= 0 || d > cap {
		d = cap
	}
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// logError logs queue errors at most once per 30 seconds, saying how many
// were suppressed in between.
func (q *Queue) logError(msg string, err error, args ...any) {
	q.status.mu.Lock()
	now := q.now()
	if !q.status.lastLog.IsZero() && now.Sub(q.status.lastLog) < 30*time.Second {
		q.status.suppressed++
		q.status.mu.Unlock()
		return
	}
	n := q.status.suppressed
	q.status.suppressed, q.status.lastLog = 0, now
	q.status.mu.Unlock()
	q.logger().Error(msg, append([]any{"err", err, "suppressed", n}, args...)...)
}
