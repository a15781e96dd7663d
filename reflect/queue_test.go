package reflect

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// flakySource fails the first n loads, then serves tasks.
type flakySource struct {
	tasks tasktest.Map
	fails atomic.Int32
}

func (f *flakySource) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	if f.fails.Add(-1) >= 0 {
		return nil, errors.New("trace store busy")
	}
	return f.tasks.Task(ctx, id)
}

// blockingReflector waits for release or ctx before answering like Rules.
type blockingReflector struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingReflector) Reflect(ctx context.Context, t *hindsight.Task) ([]hindsight.Experience, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.release:
		return Rules{}.Reflect(ctx, t)
	}
}

func rulesPipeline(store hindsight.ExperienceStore, r Reflector) *Pipeline {
	return &Pipeline{Reflector: r, Validator: &Validator{}, Merger: &Merger{Store: store}}
}

func traceTasks(t *testing.T, names ...string) tasktest.Map {
	m := tasktest.Map{}
	for _, n := range names {
		task := tasktest.Load(t, filepath.Join("testdata", "rules", n+".trace.json"))
		m[task.ID] = task
	}
	return m
}

func waitState(t *testing.T, q *Queue, id, state string) *Entry {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e, err := q.Entry(context.Background(), id)
		if err == nil && e.State == state {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never reached %s: %+v %v", id, state, e, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestQueueSurvivesRestart: a task whose reflection failed stays pending
// across a restart and the worker finishes it after its retry delay.
func TestQueueSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	store := newMemStore()
	src := &flakySource{tasks: traceTasks(t, "login_401", "date_format")}
	src.fails.Store(2)
	ctx := context.Background()

	q, err := OpenQueue(dir, src, rulesPipeline(store, Rules{}))
	if err != nil {
		t.Fatal(err)
	}
	q.Enqueue(ctx, "task-login")
	q.Enqueue(ctx, "task-date")
	if err := q.RunNow(ctx, nil, true, nil); err == nil {
		t.Fatal("want the flaky loads to fail")
	}
	st, _ := q.Stats(ctx)
	if st.Pending != 2 || st.Retrying != 2 {
		t.Fatalf("stats %+v", st)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	var states sync.Map
	q, err = OpenQueue(dir, src, rulesPipeline(store, Rules{}))
	if err != nil {
		t.Fatal(err)
	}
	q.RetryBase, q.PollInterval = 10*time.Millisecond, 20*time.Millisecond
	q.OnState = func(ctx context.Context, id, state string) error { states.Store(id, state); return nil }
	// The entries keep their retry delay (30s by default) from before the
	// restart; enqueueing again changes nothing while pending.
	q.Enqueue(ctx, "task-login")
	if e, _ := q.Entry(ctx, "task-login"); e.Attempts != 1 {
		t.Fatalf("re-enqueue reset a pending entry: %+v", e)
	}
	q.RunNow(ctx, nil, true, nil) // the worker would wait; RunNow does not
	q.Start(ctx)
	defer q.Close()
	for _, id := range []string{"task-login", "task-date"} {
		e := waitState(t, q, id, StateDone)
		if len(e.Experiences) != 1 || e.LastError != "" {
			t.Errorf("entry %+v", e)
		}
		if s, _ := states.Load(id); s != StateDone {
			t.Errorf("OnState saw %v for %s", s, id)
		}
	}
	if n := len(store.all()); n != 2 {
		t.Errorf("%d experiences, want 2", n)
	}
}

// TestQueueWorkerRetriesThenFails: the worker retries with backoff and
// marks the task failed after MaxAttempts.
func TestQueueWorkerRetriesThenFails(t *testing.T) {
	store := newMemStore()
	src := &flakySource{tasks: traceTasks(t, "login_401")}
	src.fails.Store(100)
	q, err := OpenQueue(t.TempDir(), src, rulesPipeline(store, Rules{}))
	if err != nil {
		t.Fatal(err)
	}
	q.RetryBase, q.RetryMax, q.PollInterval, q.MaxAttempts = 5*time.Millisecond, 20*time.Millisecond, 10*time.Millisecond, 3
	q.Start(context.Background())
	defer q.Close()
	q.Enqueue(context.Background(), "task-login")
	e := waitState(t, q, "task-login", StateFailed)
	if e.Attempts != 3 || e.LastError == "" {
		t.Errorf("entry %+v", e)
	}
	if m := q.metrics().Tasks(); m["retry"] != 2 || m[StateFailed] != 1 {
		t.Errorf("task counters %v", m)
	}
}

// TestQueueDrain: Close lets the task in flight finish within DrainTimeout,
// else cancels it; a cancelled task stays pending without a counted attempt.
func TestQueueDrain(t *testing.T) {
	for _, finish := range []bool{true, false} {
		name := map[bool]string{true: "finishes", false: "cancelled"}[finish]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			store := newMemStore()
			br := &blockingReflector{started: make(chan struct{}, 1), release: make(chan struct{})}
			src := traceTasks(t, "login_401")
			q, err := OpenQueue(dir, src, rulesPipeline(store, br))
			if err != nil {
				t.Fatal(err)
			}
			q.DrainTimeout = 100 * time.Millisecond
			if finish {
				q.DrainTimeout = time.Minute
			}
			q.Start(context.Background())
			q.Enqueue(context.Background(), "task-login")
			<-br.started
			if st, _ := q.Stats(context.Background()); st.Running != 1 {
				t.Errorf("running %d, want 1", st.Running)
			}
			closed := make(chan error)
			go func() { closed <- q.Close() }()
			if finish {
				time.Sleep(50 * time.Millisecond)
				close(br.release)
			}
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			q, err = OpenQueue(dir, src, rulesPipeline(store, Rules{}))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			e, _ := q.Entry(context.Background(), "task-login")
			want := map[bool]string{true: StateDone, false: StatePending}[finish]
			if e.State != want || e.Attempts != 0 {
				t.Fatalf("after close: %+v, want %s without a counted attempt", e, want)
			}
			if !finish {
				if err := q.RunNow(context.Background(), nil, true, nil); err != nil {
					t.Fatal(err)
				}
				waitState(t, q, "task-login", StateDone)
			}
			if n := len(store.all()); n != 1 {
				t.Errorf("%d experiences, want 1", n)
			}
		})
	}
}

// TestQueueReopenedTask: a done task enqueued again (late steps reopened
// it) is reflected again without counting its evidence twice.
func TestQueueReopenedTask(t *testing.T) {
	store := newMemStore()
	q, err := OpenQueue(t.TempDir(), traceTasks(t, "login_401"), rulesPipeline(store, Rules{}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	var progress [][2]int
	q.Enqueue(ctx, "task-login")
	if err := q.RunNow(ctx, nil, true, func(d, n int) { progress = append(progress, [2]int{d, n}) }); err != nil {
		t.Fatal(err)
	}
	if len(progress) != 2 || progress[0] != [2]int{0, 1} || progress[1] != [2]int{1, 1} {
		t.Errorf("progress %v", progress)
	}
	q.Enqueue(ctx, "task-login")
	if e, _ := q.Entry(ctx, "task-login"); e.State != StatePending {
		t.Fatalf("reopened task not pending: %+v", e)
	}
	if err := q.RunNow(ctx, nil, true, nil); err != nil {
		t.Fatal(err)
	}
	all := store.all()
	if len(all) != 1 || all[0].EvidenceCount != 1 {
		t.Fatalf("after re-reflection: %+v", all)
	}
	// --task on an unknown id: recorded, retried, reported.
	err = q.RunNow(ctx, []string{"nope"}, false, nil)
	if !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	if e, _ := q.Entry(ctx, "nope"); e == nil || e.State != StatePending || e.Attempts != 1 {
		t.Errorf("unknown task entry %+v", e)
	}
}
