package reflect

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// downFirst is a store whose first lists fail as an unreachable store.
type downFirst struct {
	*memStore
	fail atomic.Int32
}

func (s *downFirst) List(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	if s.fail.Add(-1) >= 0 {
		return nil, fmt.Errorf("list: %w", hindsight.ErrStoreUnavailable)
	}
	return s.memStore.List(ctx, opt)
}

// TestSweepRun: a sweeper started while the store is unreachable retries,
// merges the copies once the store answers (told through Report), sweeps
// again soon after the outage, and leaves an old lesson's copies (before
// its look-back) alone.
func TestSweepRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &downFirst{memStore: newMemStore()}
	st.fail.Store(2)
	const sit, lesson = "list_orders fails with 401 Unauthorized before login", "Call login before list_orders; without it list_orders fails with 401."
	now := time.Now()
	for i, at := range []time.Time{now, now, now.Add(-3 * time.Hour), now.Add(-3 * time.Hour)} {
		e := exp(fmt.Sprintf("t%d", i), 0.7, sit, lesson, 2)
		e.ID, e.Namespace, e.CreatedAt = fmt.Sprintf("exp_%d", i), hindsight.DefaultNamespace, at.Add(time.Duration(i)*time.Millisecond)
		if i >= 2 {
			e.Tool = "list_invoices" // the old pair, of another tool
		}
		e.EvidenceCount, e.EvidenceTasks, e.Version = 1, []string{e.SourceTask}, 1
		st.exps[e.Namespace+"/"+e.ID] = e // as created at, which Put would not keep
	}
	reports := make(chan int, 16)
	s := &Sweeper{Merger: &Merger{Store: st, Embedder: wordEmbedder{}}, Interval: time.Hour, Retry: time.Millisecond,
		Margin: time.Millisecond, Report: func(n int) { reports <- n }}
	go s.Run(ctx)
	var got []int
	for len(got) < 4 {
		got = append(got, <-reports)
	}
	if want := []int{0, 0, 1, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("copies merged by the sweeps: %v, want %v (two failed, the merge, the sweep after the outage)", got, want)
	}
	if e, _ := st.memStore.Get(ctx, hindsight.DefaultNamespace, "exp_1"); e.SupersededBy != "exp_0" {
		t.Fatalf("the newer copy is superseded by %q, want exp_0", e.SupersededBy)
	}
	if e, _ := st.memStore.Get(ctx, hindsight.DefaultNamespace, "exp_3"); e.SupersededBy != "" {
		t.Fatalf("a copy older than the look-back was merged (superseded by %q)", e.SupersededBy)
	}
}
