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
)

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
	d := &spooltest.Collector{}
	r, err := New(Options{Home: hindsight.Home(t.TempDir()), Server: "fs", Redactor: testRedactor(t), Deliverer: d,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The daemon is down while the bursts are recorded, so that delivery
	// never trims the journal under the checks below.
	d.SetDown(true)
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
	d.SetDown(false)
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
