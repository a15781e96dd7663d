package capture

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/proxy"
)

// TestFloodStaysWithinBudget floods a Recorder whose daemon (a SlowCollector
// taking one batch every 100 ms) cannot keep up: the capture queue's
// accounted bytes never pass MaxQueueBytes (the rest spills, sealed), the
// outbox holds its batches back at MaxMemBytes instead of writing the
// backlog to its database, and every step still arrives.
func TestFloodStaysWithinBudget(t *testing.T) {
	const n, budget, outboxBudget = 4000, 64 << 10, 512 << 10
	home := hindsight.Home(t.TempDir())
	d := spooltest.NewSlowCollector(100 * time.Millisecond)
	rec, err := New(Options{Home: home, Server: "flood", Redactor: testRedactor(t), Deliverer: d,
		Logger: slog.New(slog.DiscardHandler), MaxQueueBytes: budget, MaxMemBytes: outboxBudget})
	if err != nil {
		t.Fatal(err)
	}
	for i, ex := range exchanges(n) {
		// Ended later than any commit: a step is due on disk 5 s after it
		// reaches the outbox, however long it waited in the spill.
		ex.Started, ex.Ended = time.Now(), time.Now().Add(time.Hour)
		rec.Hook(ex)
		if i%256 == 0 {
			// Faster than any relay: let the spill writer keep up, or
			// exchanges are dropped (another bound, tested elsewhere).
			testkit.WaitFor(t, "the spill writer", 20*time.Second, func() bool { return len(rec.spill.in) == 0 })
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "every step delivered", 20*time.Second, func() bool { return d.Count() == n })
	st := rec.Stats()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st.QueuedBytesPeak > budget || st.QueuedBytesPeak == 0 {
		t.Errorf("queue peaked at %d accounted bytes, budget %d", st.QueuedBytesPeak, budget)
	}
	if st.ExchangesSpilled == 0 || st.ExchangesUnspilled != st.ExchangesSpilled {
		t.Errorf("spilled %d, read back %d: the flood should have spilled and been read back whole", st.ExchangesSpilled, st.ExchangesUnspilled)
	}
	if st.Spilled != 0 {
		t.Errorf("%d steps written to the outbox's database: the backlog should have waited in the queue", st.Spilled)
	}
	if st.Dropped != 0 || st.Captured != n {
		t.Errorf("captured %d of %d, dropped %d", st.Captured, n, st.Dropped)
	}
}

// TestJournaledFloodStaysOffTheDatabase floods a Recorder as the relay
// does, 64 calls in flight, each journaled by Record before its answer and
// then handed to Hook, while the daemon (a SlowCollector) cannot keep up:
// the outbox never writes a step to its database (it stays unopened), and
// every step captured arrives once.
func TestJournaledFloodStaysOffTheDatabase(t *testing.T) {
	const n, inFlight = 6000, 64
	home := hindsight.Home(t.TempDir())
	d := spooltest.NewSlowCollector(5 * time.Millisecond)
	rec, err := New(Options{Home: home, Server: "flood", Redactor: testRedactor(t), Deliverer: d,
		Logger: slog.New(slog.DiscardHandler), MaxQueueBytes: 64 << 10, MaxMemBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	exs := make(chan *proxy.Exchange, n)
	for _, ex := range exchanges(n) {
		ex.Started, ex.Ended = time.Now(), time.Now()
		exs <- ex
	}
	close(exs)
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for ex := range exs {
				ex.Started, ex.Ended = time.Now(), time.Now()
				rec.Record([]*proxy.Exchange{ex})
				rec.Hook(ex)
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rec.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	captured := rec.Stats().Captured
	testkit.WaitFor(t, "every captured step delivered", 30*time.Second, func() bool { return int64(d.Count()) >= captured })
	st := rec.Stats()
	_, dbErr := os.Stat(filepath.Join(rec.outbox.Dir(), "db"))
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Spilled != 0 || dbErr == nil {
		t.Errorf("%d steps written to the outbox's database (opened: %v): a flood the journal can hold should not reach it", st.Spilled, dbErr == nil)
	}
	// A flood faster than the spill writer drops exchanges (another
	// bound, tested elsewhere): they are counted, and nothing else is lost
	// or delivered twice.
	if st.Captured+st.Dropped != n || int64(d.Count()) != st.Captured || st.Captured < n/2 {
		t.Errorf("captured %d of %d, delivered %d, dropped %d", st.Captured, n, d.Count(), st.Dropped)
	}
}
