package reflect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
)

// Reflection states of a task, as hindsight.Task.Reflection shows them.
const (
	StatePending = "pending"
	StateDone    = "done"
	StateFailed  = "failed"
)

// Defaults of the Queue's tunables.
const (
	DefaultMaxAttempts  = 5
	DefaultRetryBase    = 30 * time.Second
	DefaultRetryMax     = 30 * time.Minute
	DefaultPollInterval = 30 * time.Minute
	DefaultDrainTimeout = 10 * time.Second
)

// keyPrefix namespaces the queue's keys in a Badger database it may share
// with the daemon's trace store.
const keyPrefix = "reflectq/"

func stateKey(state, id string) []byte { return []byte(keyPrefix + state + "/" + id) }

// Entry is one task in the reflection queue.
type Entry struct {
	TaskID      string    `json:"task_id"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	EnqueuedAt  time.Time `json:"enqueued_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	Experiences []string  `json:"experiences,omitempty"` // ids stored or reinforced
	Credited    bool      `json:"credited,omitempty"`    // the lessons that helped the task got their hits
	// Rejected are the candidates validation refused in the last
	// reflection (at most MaxRejected), redacted.
	Rejected []Rejection `json:"rejected,omitempty"`
}

// Rejection is a candidate validation refused, as the queue keeps it.
type Rejection struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"` // redacted
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Origin string `json:"origin,omitempty"`
	Lesson string `json:"lesson"` // redacted, cut
}

// MaxRejected bounds the rejections kept per task.
const MaxRejected = 20

// rejections turns validation's drops into what the queue keeps.
func rejections(drops []Drop) []Rejection {
	var out []Rejection
	for _, d := range drops {
		if len(out) == MaxRejected {
			break
		}
		out = append(out, Rejection{Reason: d.Reason, Detail: d.SafeDetail, Server: d.Experience.Server,
			Tool: d.Experience.Tool, Origin: d.Experience.Origin, Lesson: d.Lesson})
	}
	return out
}

// QueueStats is what `hindsight status` shows of reflection.
type QueueStats struct {
	Pending  int `json:"pending"`  // waiting, Running of them in reflection now
	Retrying int `json:"retrying"` // of the pending, those that failed before
	Running  int `json:"running"`
	Done     int `json:"done"`
	Failed   int `json:"failed"`

	LastRun   time.Time `json:"last_run,omitzero"`
	LastError string    `json:"last_error,omitempty"`

	Dropped map[string]int `json:"dropped,omitempty"` // candidates dropped, by reason
	Merged  map[string]int `json:"merged,omitempty"`  // experiences stored, by outcome

	LLMCallsLastHour  int `json:"llm_calls_last_hour"`
	LLMTokensLastHour int `json:"llm_tokens_last_hour"`
}

// Queue is the reflection queue, kept in Badger. Final tasks enter as
// pending; a background worker (Start) reflects on them through the
// Pipeline. A task whose reflection fails stays pending and is retried with
// a capped exponential delay, and is marked failed after MaxAttempts. A
// failure because the experience store is unreachable
// (hindsight.ErrStoreUnavailable) counts no attempt: the task waits, with
// the whole queue, until the store answers again. No task is lost across
// restarts: a task leaves pending only once its experiences are stored.
//
// Set the exported fields before Start.
type Queue struct {
	Source   TaskSource
	Pipeline *Pipeline

	MaxAttempts int           // 0 means DefaultMaxAttempts
	RetryBase   time.Duration // first retry delay; 0 means DefaultRetryBase
	RetryMax    time.Duration // cap of the retry delay; 0 means DefaultRetryMax
	// PollInterval caps the worker's sleep while a task waits for its
	// retry; 0 means DefaultPollInterval. With no task pending the worker
	// sleeps until Enqueue wakes it: an idle queue costs nothing.
	PollInterval time.Duration
	DrainTimeout time.Duration // how long Close lets a task finish; 0 means DefaultDrainTimeout
	// StoreWaitBase and StoreWaitMax bound the wait while the experience
	// store is unreachable (see storeWait); 0 means DefaultStoreWaitBase
	// and DefaultStoreWaitMax.
	StoreWaitBase, StoreWaitMax time.Duration

	// OnState, when set, is told each task's new reflection state (the
	// daemon records it on the task). Errors are logged.
	OnState func(ctx context.Context, taskID, state string) error
	// Written, when set, is called after each write to the queue's
	// entries: a database that syncs on a timer (the daemon's trace
	// store) learns it has something to sync.
	Written func()

	Logger  *slog.Logger
	Metrics *Metrics // nil: a fresh one

	db    *badger.DB
	ownDB bool
	now   func() time.Time

	swOnce sync.Once
	sw     *storeWait
	procMu sync.Mutex // one reflection at a time
	// updMu serializes the queue's read-modify-write transactions: in a
	// database without conflict detection (the daemon's trace store)
	// Badger would not catch two of them crossing.
	updMu   sync.Mutex
	running atomic.Int32
	wake    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}

	mu        sync.Mutex
	lastRun   time.Time
	lastErr   string
	lastLog   time.Time
	suppessed int
}

// NewQueue returns a queue kept in db, which the caller owns.
func NewQueue(db *badger.DB, src TaskSource, p *Pipeline) *Queue {
	return &Queue{db: db, Source: src, Pipeline: p, wake: make(chan struct{}, 1), now: time.Now}
}

// OpenQueue opens (creating it) a Badger database in dir for the queue
// alone; Close closes it.
func OpenQueue(dir string, src TaskSource, p *Pipeline) (*Queue, error) {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return nil, fmt.Errorf("open reflection queue: %w", err)
	}
	q := NewQueue(db, src, p)
	q.ownDB = true
	return q, nil
}

func (q *Queue) logger() *slog.Logger {
	if q.Logger != nil {
		return q.Logger
	}
	return slog.Default()
}

func (q *Queue) metrics() *Metrics {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.Metrics == nil {
		q.Metrics = NewMetrics()
	}
	return q.Metrics
}

// Enqueue adds a final task as pending. Enqueuing a pending task again
// changes nothing. A task already done or failed becomes pending again
// with its attempts reset: the daemon enqueues a task again only when late
// steps reopened it, and merging is idempotent per task, so its evidence
// is not counted twice.
func (q *Queue) Enqueue(ctx context.Context, taskID string) error {
	if taskID == "" {
		return errors.New("enqueue task: empty id")
	}
	added := false
	err := q.update(func(txn *badger.Txn) error {
		added = false
		e, err := q.get(txn, taskID)
		if err != nil || (e != nil && e.State == StatePending) {
			return err
		}
		now := q.now().UTC()
		old := ""
		if e == nil {
			e = &Entry{TaskID: taskID, EnqueuedAt: now}
		} else {
			old = e.State
			e.Attempts, e.LastError, e.NextAttempt = 0, "", time.Time{}
		}
		e.State, e.UpdatedAt = StatePending, now
		added = true
		return q.put(txn, old, e)
	})
	if err != nil {
		return fmt.Errorf("enqueue task %s: %w", taskID, err)
	}
	if added {
		q.notify(ctx, taskID, StatePending)
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// notify tells OnState of a task's new state.
func (q *Queue) notify(ctx context.Context, id, state string) {
	if q.OnState == nil {
		return
	}
	if err := q.OnState(context.WithoutCancel(ctx), id, state); err != nil {
		q.logError("reflect: record task state", err, "task", id, "state", state)
	}
}

// Entry returns the queue entry of a task, or an error wrapping
// hindsight.ErrNotFound.
func (q *Queue) Entry(ctx context.Context, taskID string) (*Entry, error) {
	var e *Entry
	err := q.db.View(func(txn *badger.Txn) error {
		var err error
		e, err = q.get(txn, taskID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read queue entry %s: %w", taskID, err)
	}
	if e == nil {
		return nil, fmt.Errorf("read queue entry %s: %w", taskID, hindsight.ErrNotFound)
	}
	return e, nil
}

// State returns the reflection state of a task ("pending", "done",
// "failed"), or "" for a task not in the queue.
func (q *Queue) State(ctx context.Context, taskID string) (string, error) {
	e, err := q.Entry(ctx, taskID)
	if errors.Is(err, hindsight.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return e.State, nil
}

// List returns the entries in state, oldest first.
func (q *Queue) List(ctx context.Context, state string) ([]Entry, error) {
	var out []Entry
	err := q.db.View(func(txn *badger.Txn) error {
		prefix := stateKey(state, "")
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var e Entry
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &e) }); err != nil {
				return fmt.Errorf("decode %s: %w", it.Item().Key(), err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s tasks: %w", state, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].EnqueuedAt.Before(out[j].EnqueuedAt) })
	return out, nil
}

// Rejected returns the done entries with refused candidates, the latest
// reflected first.
func (q *Queue) Rejected(ctx context.Context) ([]Entry, error) {
	done, err := q.List(ctx, StateDone)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range done {
		if len(e.Rejected) > 0 {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out, nil
}

// Stats counts the queue's entries and reports what reflection did since
// the daemon started.
func (q *Queue) Stats(ctx context.Context) (QueueStats, error) {
	var s QueueStats
	pending, err := q.List(ctx, StatePending)
	if err != nil {
		return s, err
	}
	s.Pending = len(pending)
	for _, e := range pending {
		if e.Attempts > 0 {
			s.Retrying++
		}
	}
	err = q.db.View(func(txn *badger.Txn) error {
		for _, c := range []struct {
			state string
			n     *int
		}{{StateDone, &s.Done}, {StateFailed, &s.Failed}} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: stateKey(c.state, "")})
			for it.Rewind(); it.Valid(); it.Next() {
				*c.n++
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("count queue: %w", err)
	}
	m := q.metrics()
	s.Running = int(q.running.Load())
	s.Dropped, s.Merged = m.Dropped(), m.Merged()
	q.mu.Lock()
	s.LastRun, s.LastError = q.lastRun, q.lastErr
	q.mu.Unlock()
	if q.Pipeline != nil {
		if b, ok := q.Pipeline.Reflector.(interface{ Budget() *Budget }); ok {
			s.LLMCallsLastHour, s.LLMTokensLastHour = b.Budget().Used()
		}
	}
	return s, nil
}

// RunNow reflects at once on the tasks ids and, when pending is true, on
// every pending task, whatever their retry delay. Tasks in ids are
// reflected on again even when done or failed. progress, when not nil, is
// called before the first task and after each one. RunNow returns the
// errors of the tasks that failed, joined; it stops early when ctx ends or
// the hourly LLM budget is spent.
func (q *Queue) RunNow(ctx context.Context, ids []string, pending bool, progress func(done, total int)) error {
	todo := append([]string(nil), ids...)
	if pending {
		entries, err := q.List(ctx, StatePending)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, id := range ids {
			seen[id] = true
		}
		for _, e := range entries {
			if !seen[e.TaskID] {
				todo = append(todo, e.TaskID)
			}
		}
	}
	if progress != nil {
		progress(0, len(todo))
	}
	var errs []error
	for i, id := range todo {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		err := q.process(ctx, ctx, id, true)
		if errors.Is(err, ErrBudget) {
			return errors.Join(append(errs, err)...)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if progress != nil {
			progress(i+1, len(todo))
		}
	}
	return errors.Join(errs...)
}

// Start runs the worker in the background until Close.
func (q *Queue) Start(ctx context.Context) {
	loopCtx, stop := context.WithCancel(ctx)
	// The work context outlives the loop's by DrainTimeout, so a task in
	// flight at shutdown can finish.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	q.stop = stop
	q.done = make(chan struct{})
	go func() {
		defer close(q.done)
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
	if q.stop != nil {
		q.stop()
		<-q.done
	}
	if q.ownDB {
		return q.db.Close()
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
			case <-q.wake:
			}
			continue
		}
		wait = min(max(wait, min(time.Second, poll)), poll)
		t := time.NewTimer(wait)
		select {
		case <-loopCtx.Done():
			t.Stop()
			return
		case <-q.wake:
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
	q.procMu.Lock()
	defer q.procMu.Unlock()
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
	q.running.Add(1)
	defer q.running.Add(-1)
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
	q.mu.Lock()
	q.lastRun = q.now().UTC()
	q.mu.Unlock()
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
		q.mu.Lock()
		q.lastErr = fmt.Sprintf("task %s waits for the experience store (next try in %s): %v", id, wait.Round(time.Second), err)
		q.mu.Unlock()
		m.task("store_wait")
		q.logger().Warn("reflect: experience store unreachable; task waits without counting an attempt", "task", id, "retry_in", wait, "err", err)
		return err
	}
	if q.storeWait().up() {
		q.mu.Lock()
		q.lastErr = "" // the store is back: its wait is no longer news
		q.mu.Unlock()
	}
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
		q.notify(workCtx, id, StateDone)
		return nil
	}
	q.mu.Lock()
	q.lastErr = recErr.Error()
	q.mu.Unlock()
	if failed {
		m.task(StateFailed)
		q.notify(workCtx, id, StateFailed)
		q.logger().Error("reflect: task marked failed", "task", id, "err", err)
	} else {
		m.task("retry")
		q.logger().Warn("reflect: task reflection failed; will retry", "task", id, "err", recErr)
	}
	return &taskError{recErr}
}

// storeWait returns the queue's wait for an unreachable store.
func (q *Queue) storeWait() *storeWait {
	q.swOnce.Do(func() {
		base, max := q.StoreWaitBase, q.StoreWaitMax
		if base <= 0 {
			base = DefaultStoreWaitBase
		}
		if max <= 0 {
			max = DefaultStoreWaitMax
		}
		q.sw = newStoreWait(base, max)
	})
	return q.sw
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
	q.mu.Lock()
	now := q.now()
	if !q.lastLog.IsZero() && now.Sub(q.lastLog) < 30*time.Second {
		q.suppessed++
		q.mu.Unlock()
		return
	}
	n := q.suppessed
	q.suppessed, q.lastLog = 0, now
	q.mu.Unlock()
	q.logger().Error(msg, append([]any{"err", err, "suppressed", n}, args...)...)
}

// get returns the entry of id in any state, or nil.
func (q *Queue) get(txn *badger.Txn, id string) (*Entry, error) {
	for _, st := range []string{StatePending, StateDone, StateFailed} {
		item, err := txn.Get(stateKey(st, id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var e Entry
		if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &e) }); err != nil {
			return nil, fmt.Errorf("decode queue entry %s: %w", id, err)
		}
		e.State = st
		return &e, nil
	}
	return nil, nil
}

// put writes e under its state, removing it from oldState.
func (q *Queue) put(txn *badger.Txn, oldState string, e *Entry) error {
	if oldState != "" && oldState != e.State {
		if err := txn.Delete(stateKey(oldState, e.TaskID)); err != nil {
			return err
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return txn.Set(stateKey(e.State, e.TaskID), b)
}

// update runs fn in a read-write transaction, one at a time, retrying on
// conflicts.
func (q *Queue) update(fn func(txn *badger.Txn) error) error {
	q.updMu.Lock()
	defer q.updMu.Unlock()
	var err error
	for range 5 {
		if err = q.db.Update(fn); !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if err == nil && q.Written != nil {
		q.Written()
	}
	return err
}
