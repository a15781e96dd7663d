package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// testSteps returns n tools/call steps of one session, a second apart,
// as a Recorder builds them.
func testSteps(n int) []hindsight.Step {
	base := spooltest.Base
	out := make([]hindsight.Step, n)
	for i := range out {
		at := base.Add(time.Duration(i) * time.Second)
		out[i] = hindsight.Step{SessionID: "s1", Server: "fs", Method: "tools/call", Tool: "read_file",
			Arguments: json.RawMessage(fmt.Sprintf(`{"path":"/p/%d"}`, i)), StartedAt: at, EndedAt: at.Add(1500 * time.Microsecond)}
	}
	return out
}

// TestDrainOrphans: an outbox left by a sidecar that could not deliver is
// drained by the next one; a live sidecar's outbox is left alone; a
// corrupt one is moved aside.
func TestDrainOrphans(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	dead, err := Open(Options{Home: home, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	dead.Append(testSteps(50)) // no deliverer: written at once
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	dead.Close(ctx) // no deliverer: the steps stay
	cancel()

	live, err := Open(Options{Home: home, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	live.Append(testSteps(1))

	corrupt := filepath.Join(home.Outboxes(), "20260101T000000.000000-1-deadbeef")
	os.MkdirAll(filepath.Join(corrupt, dbName), 0o700)
	os.WriteFile(filepath.Join(corrupt, dbName, "MANIFEST"), []byte("not a manifest at all"), 0o600)

	// A disk short of the drain's reserve: it writes and delivers nothing.
	short := &spooltest.Collector{}
	if n, err := DrainOrphans(context.Background(), home, short, DrainOptions{DiskReserve: 1 << 60}); !errors.Is(err, diskspace.ErrLow) || n != 0 || len(short.Got()) != 0 {
		t.Fatalf("drain on a disk short of its reserve: %d delivered, %v; want none and ErrLow", n, err)
	}
	// The daemon is down: nothing is lost, the orphan stays.
	down := &spooltest.Collector{}
	down.SetDown(true)
	if _, err := DrainOrphans(context.Background(), home, down, DrainOptions{}); err == nil {
		t.Fatal("drain with the daemon down reported success")
	}
	d := &spooltest.Collector{}
	n, err := DrainOrphans(context.Background(), home, d, DrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 50 {
		t.Errorf("drained %d, want 50", n)
	}
	spooltest.CheckInOrder(t, d.Got(), 50, dead.ID())
	if _, err := os.Stat(filepath.Join(home.Outboxes(), dead.ID())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("drained orphan not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home.Outboxes(), live.ID())); err != nil {
		t.Errorf("live outbox touched: %v", err)
	}
	aside, _ := filepath.Glob(filepath.Join(home.Outboxes(), corruptDir, "*"))
	if len(aside) != 1 {
		t.Errorf("corrupt outbox not moved aside: %v", aside)
	}
	live.Close(ctx)
}

// TestOutboxHoldsInMemoryWhenDiskFails: when no database can be opened
// (full disk, unwritable home), steps are held in memory up to the bound,
// delivered from there in order, and the failure is counted.
func TestOutboxHoldsInMemoryWhenDiskFails(t *testing.T) {
	openDB = func(dir string, _ *slog.Logger) (*badger.DB, error) {
		return nil, errors.New("no space left on device")
	}
	defer func() { openDB = openBadger }()
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{}
	d.SetDown(true)
	c := &counters{}
	o, err := open(Options{Home: home, Deliverer: d, Logger: slog.New(slog.DiscardHandler), MaxHeld: 5, JournalPersistAfter: 20 * time.Millisecond}, c)
	if err != nil {
		t.Fatal(err)
	}
	steps := make([]hindsight.Step, 8)
	for i := range steps {
		steps[i] = hindsight.Step{Method: "tools/call", EndedAt: time.Now()}
	}
	o.Append(steps)
	// The database is opened when the steps must be written: PersistAfter
	// after their exchanges ended.
	testkit.WaitFor(t, "the failed write", 20*time.Second, func() bool { return c.snapshot().WriteErrors > 0 })
	if st := c.snapshot(); st.Held != 5 || st.Dropped != 3 || st.Depth != 5 {
		t.Errorf("stats %+v", st)
	}
	d.SetDown(false)
	testkit.WaitFor(t, "delivery from memory", 20*time.Second, func() bool { return c.delivered.Load() == 5 })
	for i, s := range d.Got() {
		if s.Seq != uint64(i+1) {
			t.Fatalf("seq %d at %d", s.Seq, i)
		}
	}
	if st := c.snapshot(); st.Held != 0 || st.Depth != 0 {
		t.Errorf("after delivery: %+v", st)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxOpensDiskWhenNeeded: while the daemon acknowledges steps in
// time the outbox creates no database (nothing of Badger runs in the
// sidecar); a daemon that answers late makes it open one ahead of the
// deadline and write the steps there, and they are delivered once.
func TestOutboxOpensDiskWhenNeeded(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := spooltest.NewSlowCollector(0)
	c := &counters{}
	// A deadline far beyond delivery's linger, so that a loaded machine
	// does not make the first part fail.
	const persistAfter = 500 * time.Millisecond
	o, err := open(Options{Home: home, Deliverer: d, Logger: slog.New(slog.DiscardHandler), PersistAfter: persistAfter, JournalPersistAfter: persistAfter}, c)
	if err != nil {
		t.Fatal(err)
	}
	step := func() []hindsight.Step { return []hindsight.Step{{Method: "tools/call", EndedAt: time.Now()}} }
	for range 20 {
		o.Append(step())
		time.Sleep(2 * time.Millisecond)
	}
	testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return c.delivered.Load() == 20 })
	if _, err := os.Stat(filepath.Join(o.Dir(), dbName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("database created while the daemon kept up: %v", err)
	}
	if o.db.Load() != nil || c.spilled.Load() != 0 {
		t.Fatalf("steps written while the daemon kept up: %+v", c.snapshot())
	}

	d.SetDelay(2 * persistAfter)
	o.Append(step())
	testkit.WaitFor(t, "the step on disk", 20*time.Second, func() bool { return c.spilled.Load() == 1 })
	if o.db.Load() == nil {
		t.Fatal("no database")
	}
	testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return c.delivered.Load() == 21 })
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("emptied outbox not removed: %v", err)
	}
	if got := d.Count(); got != 21 {
		t.Errorf("delivered %d steps, want 21", got)
	}
}

// TestOutboxClosesIdleDisk: a database opened because the daemon answered
// late is closed and removed once everything in it was delivered and
// nothing was written for idleDisk, and opened again when needed; a
// refused step kept in it keeps it open.
func TestOutboxClosesIdleDisk(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := spooltest.NewSlowCollector(0)
	c := &counters{}
	o, err := open(Options{Home: home, Deliverer: d, Logger: slog.New(slog.DiscardHandler), PersistAfter: 20 * time.Millisecond, JournalPersistAfter: 20 * time.Millisecond}, c)
	if err != nil {
		t.Fatal(err)
	}
	dbDir := filepath.Join(o.Dir(), dbName)
	late := func(n int64) {
		t.Helper()
		d.Hold()
		o.Append([]hindsight.Step{{Method: "tools/call", EndedAt: time.Now()}})
		testkit.WaitFor(t, "the step on disk", 20*time.Second, func() bool { return c.spilled.Load() == n })
		d.Release()
		testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return c.delivered.Load() == n })
	}
	late(1)
	o.closeIdleDisk(time.Now())
	if o.db.Load() == nil {
		t.Fatal("closed right after a write")
	}
	o.closeIdleDisk(time.Now().Add(2 * idleDisk))
	if o.db.Load() != nil {
		t.Fatal("idle database not closed")
	}
	if _, err := os.Stat(dbDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("idle database not removed: %v", err)
	}

	late(2) // opened again
	o.mu.Lock()
	o.keptRejected = true
	o.mu.Unlock()
	o.closeIdleDisk(time.Now().Add(2 * idleDisk))
	if o.db.Load() == nil {
		t.Fatal("closed with a refused step in it")
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := d.Count(); got != 2 {
		t.Errorf("delivered %d steps, want 2", got)
	}
}

// TestOutboxJournalBacklog: steps are journaled until a backlog builds
// up (MaxMemBytes: the Recorder holds capture back from half of it, and
// what passes that is journaled too, not written to Badger as well); the
// steps after it are written to Badger PersistAfter after their exchange,
// and the journaled ones before them, due much later, do not hold them
// back. The journal keeps only what is in memory alone.
func TestOutboxJournalBacklog(t *testing.T) {
	o, c := openStalled(t, Options{PersistAfter: 20 * time.Millisecond, JournalPersistAfter: time.Hour, MaxMemBytes: 2 << 20})
	text := strings.Repeat("x", 4<<10)
	batch := func(n int) []hindsight.Step {
		out := make([]hindsight.Step, n)
		for i := range out {
			out[i] = hindsight.Step{Method: "tools/call", EndedAt: time.Now(), Arguments: json.RawMessage(`"` + text + `"`)}
		}
		return out
	}
	o.Append(batch(300)) // ~1.2 MB: journaled, due in an hour
	o.Append(batch(250)) // past half of MaxMemBytes, below it: journaled too
	journaled, _ := readJournal(o.Dir(), slog.New(slog.DiscardHandler))
	if len(journaled) != 550 || c.spilled.Load() != 0 || o.db.Load() != nil {
		t.Fatalf("journaled %d, written %d (database open: %v); want 550, 0, false", len(journaled), c.spilled.Load(), o.db.Load() != nil)
	}
	o.Append(batch(1)) // a backlog now: due in 20 ms, and the rest with it
	testkit.WaitFor(t, "the backlog on disk", 20*time.Second, func() bool { return c.spilled.Load() == 551 })
	journaled, _ = readJournal(o.Dir(), slog.New(slog.DiscardHandler))
	if len(journaled) != 0 {
		t.Errorf("journal still holds %d steps that are in the database", len(journaled))
	}
}

// openStalled opens an outbox with opts whose daemon never answers, closed
// (without waiting for it) when the test ends.
func openStalled(t *testing.T, opts Options) (*Spool, *counters) {
	t.Helper()
	opts.Home, opts.Deliverer, opts.Logger = hindsight.Home(t.TempDir()), spooltest.NewSlowCollector(time.Hour), slog.New(slog.DiscardHandler)
	c := &counters{}
	o, err := open(opts, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		o.Close(ctx)
	})
	return o, c
}

func TestOutboxRetention(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	c := &counters{}
	o, err := open(Options{Home: home, Logger: slog.New(slog.DiscardHandler), Retention: time.Hour}, c)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	o.Append([]hindsight.Step{{EndedAt: old}, {EndedAt: old.Add(time.Minute)}, {EndedAt: time.Now()}})
	// Steps that look two hours old in a sidecar up for a moment mean the
	// clock jumped: nothing expires.
	o.enforceRetention()
	if st := c.snapshot(); st.Expired != 0 || st.Depth != 3 {
		t.Errorf("after a clock jump: %+v", st)
	}
	o.retMu.Lock()
	o.opened = time.Now().Add(-3 * time.Hour) // up for three hours
	o.retMu.Unlock()
	o.enforceRetention()
	if st := c.snapshot(); st.Expired != 2 || st.Depth != 1 {
		t.Errorf("stats %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	o.Close(ctx)
}

// rawCollector is a spooltest.Collector that is also a RawDeliverer: it
// keeps the encodings it is given, decoded, and counts its raw calls.
type rawCollector struct {
	spooltest.Collector
	rawCalls atomic.Int64
}

func (c *rawCollector) Deliver(ctx context.Context, steps []hindsight.Step) error {
	return errors.New("Deliver called on a RawDeliverer")
}

func (c *rawCollector) DeliverRaw(ctx context.Context, raws []json.RawMessage) error {
	steps := make([]hindsight.Step, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &steps[i]); err != nil {
			return fmt.Errorf("%w: %v", ErrRejected, err)
		}
	}
	c.rawCalls.Add(1)
	return c.Collector.Deliver(ctx, steps)
}

// TestOutboxDeliversRaw: a RawDeliverer gets the stored encodings, in
// order, including after an outage (read back from disk) and around a
// refused step.
func TestOutboxDeliversRaw(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &rawCollector{Collector: spooltest.Collector{Refuse: spooltest.Reject(ErrRejected, func(s hindsight.Step) bool { return s.Seq == 5 })}}
	d.SetDown(true)
	ob, err := open(Options{Home: home, Deliverer: d, Logger: slog.New(slog.DiscardHandler), MaxMemBytes: 1}, &counters{})
	if err != nil {
		t.Fatal(err)
	}
	var steps []hindsight.Step
	for i := range 40 {
		steps = append(steps, hindsight.Step{Method: "tools/call", Tool: "echo", Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), EndedAt: time.Now()})
	}
	steps[4].Arguments = json.RawMessage("{\n  \"i\": 4\n}") // pretty, as an HTTP body may be
	ob.Append(steps[:20])
	testkit.WaitFor(t, "a failed attempt", 20*time.Second, func() bool { return ob.c.deliveryFailures.Load() >= 1 })
	ob.Append(steps[20:])
	d.SetDown(false)
	testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return ob.c.delivered.Load() == 39 && ob.c.rejected.Load() == 1 })
	if err := ob.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The refused step is kept as one line of compact JSON.
	b, err := os.ReadFile(filepath.Join(home.Outboxes(), ".rejected", ob.ID()+".jsonl"))
	if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); err != nil || len(lines) != 1 ||
		!json.Valid([]byte(lines[0])) || !strings.Contains(lines[0], `"arguments":{"i":4}`) || !strings.Contains(lines[0], `"seq":5`) {
		t.Errorf("refused step not kept as a line: %v %q", err, b)
	}
	got := d.Got()
	if len(got) != 39 || d.rawCalls.Load() == 0 {
		t.Fatalf("got %d steps in %d raw calls", len(got), d.rawCalls.Load())
	}
	for i, s := range got {
		want := uint64(i + 1)
		if want >= 5 {
			want++
		}
		if s.Seq != want || s.Source != ob.ID() || string(s.Arguments) != fmt.Sprintf(`{"i":%d}`, want-1) {
			t.Fatalf("step %d: seq %d source %q arguments %s", i, s.Seq, s.Source, s.Arguments)
		}
	}
}

// TestOutboxJournaledLateStepStaysInMemory: a step that reaches the outbox
// long after its exchange ended (it waited in the capture queue's spill) is
// journaled and waits JournalPersistAfter from then, not written to Badger
// at once as one past its due time would be.
func TestOutboxJournaledLateStepStaysInMemory(t *testing.T) {
	o, c := openStalled(t, Options{JournalPersistAfter: time.Hour})
	o.Append([]hindsight.Step{{Method: "tools/call", EndedAt: time.Now().Add(-2 * time.Hour)}})
	journaled, _ := readJournal(o.Dir(), slog.New(slog.DiscardHandler))
	if len(journaled) != 1 || c.spilled.Load() != 0 || o.db.Load() != nil {
		t.Fatalf("journaled %d, written %d (database open: %v); want 1, 0, false", len(journaled), c.spilled.Load(), o.db.Load() != nil)
	}
}
