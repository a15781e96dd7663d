package capture

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/spool"
)

// heldDaemon is a daemon that answers no delivery until release is
// closed, then takes every step.
type heldDaemon struct {
	spooltest.Collector
	release chan struct{}
}

func (d *heldDaemon) Deliver(ctx context.Context, steps []hindsight.Step) error {
	select {
	case <-d.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return d.Collector.Deliver(ctx, steps)
}

// journaled returns the outbox's journal segments, concatenated.
func journaled(t *testing.T, r *Recorder) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(r.outbox.Dir(), "journal-*"))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	return all.String()
}

// TestRecordJournalsBeforeReturning: Record (the proxy calls it before it
// writes the answers) leaves the steps redacted in the outbox's journal
// when it returns; Hook, called afterwards as the proxy does, does not
// record them again; exchanges only hooked (cancellations, another
// transport) are recorded after them; every step is delivered once, in
// order.
func TestRecordJournalsBeforeReturning(t *testing.T) {
	d := &heldDaemon{release: make(chan struct{})}
	r, err := New(Options{Home: hindsight.Home(t.TempDir()), Server: "fs", Redactor: testRedactor(t), Deliverer: d,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The daemon holds every delivery while the bursts are recorded, so
	// that nothing trims the journal under the checks below: neither an
	// acknowledgement nor, as a daemon that answers with an error would
	// make the outbox do, a write of the journaled steps to its database.
	exs := exchanges(30)
	for lo := 0; lo < 20; lo += 5 {
		burst := exs[lo : lo+5]
		r.Record(burst)
		j := journaled(t, r)
		for _, ex := range burst {
			if !ex.Recorded {
				t.Fatalf("exchange %s not marked recorded", ex.Request)
			}
			r.Hook(ex)
		}
		for i := range lo + 5 {
			if !strings.Contains(j, `/p/`+strconv.Itoa(i)+`"`) {
				t.Fatalf("after Record of %d..%d, step %d is not in the journal", lo, lo+4, i)
			}
		}
		if strings.Contains(j, "-secret") {
			t.Fatal("the journal holds an unredacted token")
		}
	}
	close(d.release)
	for _, ex := range exs[20:] {
		r.Hook(ex)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	spooltest.CheckInOrder(t, d.Got(), 30, r.Source())
	if st := r.Stats(); st.Captured != 30 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestRecordLeavesToHookWhenClosed: after Close, Record takes nothing, and
// Hook counts the exchanges it is then handed as lost.
func TestRecordLeavesToHookWhenClosed(t *testing.T) {
	r, err := New(Options{Home: hindsight.Home(t.TempDir()), Redactor: testRedactor(t), Deliverer: &spooltest.Collector{},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	exs := exchanges(2)
	r.Record(exs)
	for _, ex := range exs {
		if ex.Recorded {
			t.Fatal("a closed recorder marked an exchange recorded")
		}
		r.Hook(ex)
	}
	if st := r.Stats(); st.Dropped != 2 {
		t.Errorf("dropped %d after close, want 2", st.Dropped)
	}
}

// TestRecordOwesWhatItLeaves: exchanges Record leaves to the queue (here:
// an outbox without a daemon does not journal) are owed in the outbox's
// ledger when Record returns, before their answers; those only hooked are
// owed by Hook; once their steps are in the outbox nothing is owed.
func TestRecordOwesWhatItLeaves(t *testing.T) {
	r, err := New(Options{Home: hindsight.Home(t.TempDir()), Server: "fs", Redactor: testRedactor(t),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	owes := func() int64 {
		t.Helper()
		n, err := spool.LedgerUnsettled(r.outbox.Dir())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	exs := exchanges(12)
	r.Record(exs[:8])
	if n := owes(); n != 8 {
		t.Fatalf("Record left 8 exchanges to the queue: %d owed, want 8", n)
	}
	for _, ex := range exs[:8] {
		if ex.Recorded || !ex.Owed {
			t.Fatalf("exchange left to the queue marked recorded %v, owed %v", ex.Recorded, ex.Owed)
		}
	}
	for _, ex := range exs {
		r.Hook(ex) // the last 4 never went through Record
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := owes(); n != 0 {
		t.Errorf("every step in the outbox's database: %d still owed", n)
	}
	if got := r.Stats().Captured; got != 12 {
		t.Errorf("captured %d steps, want 12", got)
	}
}
