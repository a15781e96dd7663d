package reflect

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// unreachableStore answers as an unreachable store while down is set,
// counting the calls it refused.
type unreachableStore struct {
	*memStore
	down    atomic.Bool
	refused atomic.Int32
}

func (s *unreachableStore) err() error {
	if s.down.Load() {
		s.refused.Add(1)
		return fmt.Errorf("weaviate: %w: dial tcp 127.0.0.1:1: connect: connection refused", hindsight.ErrStoreUnavailable)
	}
	return nil
}

func (s *unreachableStore) Put(ctx context.Context, e *hindsight.Experience) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.memStore.Put(ctx, e)
}

func (s *unreachableStore) Get(ctx context.Context, ns, id string) (*hindsight.Experience, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.memStore.Get(ctx, ns, id)
}

func (s *unreachableStore) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.memStore.Search(ctx, q)
}

// countingReflector counts the reflections asked of Rules.
type countingReflector struct{ n atomic.Int32 }

func (c *countingReflector) Reflect(ctx context.Context, t *hindsight.Task) ([]hindsight.Experience, error) {
	c.n.Add(1)
	return Rules{}.Reflect(ctx, t)
}

// TestQueueWaitsForUnreachableStore: a task whose lessons cannot be stored
// because the store is unreachable stays pending, however long the outage,
// without counting attempts; the worker probes the store instead of
// reflecting again, and the lessons are stored once it is back.
func TestQueueWaitsForUnreachableStore(t *testing.T) {
	store := &unreachableStore{memStore: newMemStore()}
	store.down.Store(true)
	r := &countingReflector{}
	q, err := OpenQueue(t.TempDir(), traceTasks(t, "login_401"), rulesPipeline(store, r))
	if err != nil {
		t.Fatal(err)
	}
	q.MaxAttempts, q.PollInterval = 2, 10*time.Millisecond
	q.StoreWaitBase, q.StoreWaitMax = 2*time.Millisecond, 10*time.Millisecond
	q.Start(context.Background())
	defer q.Close()
	ctx := context.Background()
	q.Enqueue(ctx, "task-login")
	deadline := time.Now().Add(20 * time.Second)
	for store.refused.Load() < 10 { // many more tries than MaxAttempts
		if time.Now().After(deadline) {
			t.Fatalf("the store was asked %d times", store.refused.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	e, err := q.Entry(ctx, "task-login")
	if err != nil || e.State != StatePending || e.Attempts != 0 {
		t.Fatalf("entry during the outage: %+v, %v", e, err)
	}
	st, _ := q.Stats(ctx)
	if st.Failed != 0 || st.LastError == "" {
		t.Fatalf("stats during the outage: %+v", st)
	}
	store.down.Store(false)
	e = waitState(t, q, "task-login", StateDone)
	if len(e.Experiences) != 1 || len(store.all()) != 1 {
		t.Fatalf("after the outage: entry %+v, %d experiences", e, len(store.all()))
	}
	if n := r.n.Load(); n != 2 {
		t.Errorf("reflected %d times, want 2 (the try that met the outage, the one after)", n)
	}
}
