package reflect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

	entries queueDB
	now     func() time.Time
	worker  queueWorker
	status  queueStatus
	// sw is the wait for an unreachable experience store, made on first
	// need from StoreWaitBase and StoreWaitMax.
	sw struct {
		once sync.Once
		wait *storeWait
	}
}

// queueWorker is the background worker's lifecycle: it reflects on one
// task at a time, is woken by Enqueue and stopped by Close.
type queueWorker struct {
	procMu  sync.Mutex // one reflection at a time
	running atomic.Int32
	wake    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

// queueStatus is what Stats reports of the last reflection, and the rate
// limit of the queue's error log. Its mu also guards the Queue's Metrics
// while they are made on first use.
type queueStatus struct {
	mu         sync.Mutex
	lastRun    time.Time
	lastErr    string
	lastLog    time.Time
	suppressed int
}

// NewQueue returns a queue kept in db, which the caller owns.
func NewQueue(db *badger.DB, src TaskSource, p *Pipeline) *Queue {
	return &Queue{entries: queueDB{db: db}, Source: src, Pipeline: p, worker: queueWorker{wake: make(chan struct{}, 1)}, now: time.Now}
}

// OpenQueue opens (creating it) a Badger database in dir for the queue
// alone; Close closes it.
func OpenQueue(dir string, src TaskSource, p *Pipeline) (*Queue, error) {
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return nil, fmt.Errorf("open reflection queue: %w", err)
	}
	q := NewQueue(db, src, p)
	q.entries.own = true
	return q, nil
}

func (q *Queue) logger() *slog.Logger {
	if q.Logger != nil {
		return q.Logger
	}
	return slog.Default()
}

func (q *Queue) metrics() *Metrics {
	q.status.mu.Lock()
	defer q.status.mu.Unlock()
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
		case q.worker.wake <- struct{}{}:
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
	err := q.entries.db.View(func(txn *badger.Txn) error {
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
	err := q.entries.db.View(func(txn *badger.Txn) error {
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
	err = q.entries.db.View(func(txn *badger.Txn) error {
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
	s.Running = int(q.worker.running.Load())
	s.Dropped, s.Merged = m.Dropped(), m.Merged()
	q.status.mu.Lock()
	s.LastRun, s.LastError = q.status.lastRun, q.status.lastErr
	q.status.mu.Unlock()
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
