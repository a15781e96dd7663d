package capture

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
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/prometheus/client_golang/prometheus"
)

// collector is a Deliverer standing in for the daemon client: it keeps
// what it is given, and can be told to be down or to refuse steps.
type collector struct {
	mu     sync.Mutex
	steps  []hindsight.Step
	down   bool
	refuse func(hindsight.Step) bool
	calls  int
}

func (c *collector) Deliver(ctx context.Context, steps []hindsight.Step) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.down {
		return errors.New("dial unix hindsight.sock: connect: connection refused")
	}
	for _, s := range steps {
		if c.refuse != nil && c.refuse(s) {
			return errors.Join(ErrRejected, errors.New("bad step"))
		}
	}
	c.steps = append(c.steps, steps...)
	return nil
}

func (c *collector) setDown(d bool) { c.mu.Lock(); c.down = d; c.mu.Unlock() }

func (c *collector) got() []hindsight.Step {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]hindsight.Step(nil), c.steps...)
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(ioDiscard{}, nil))
}

type ioDiscard struct{}

func (ioDiscard) Write(p []byte) (int, error) { return len(p), nil }

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exchanges returns n tools/call exchanges of one session.
func exchanges(n int) []*proxy.Exchange {
	sess := &proxy.Session{ID: "s1", Server: "fs", Transport: "stdio", HostPID: 99}
	base := time.Date(2026, 11, 30, 9, 0, 0, 123456789, time.UTC)
	var out []*proxy.Exchange
	for i := range n {
		req := `{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/p/` + itoa(i) + `","token":"tk-` + itoa(i) + `-secret"}}}`
		resp := `{"jsonrpc":"2.0","id":` + itoa(i) + `,"result":{"content":[{"type":"text","text":"line ` + itoa(i) + `"}]}}`
		out = append(out, &proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Method: "tools/call",
			Request: []byte(req), Response: []byte(resp),
			Started: base.Add(time.Duration(i) * time.Second), Ended: base.Add(time.Duration(i)*time.Second + 1500*time.Microsecond)})
	}
	return out
}

func checkInOrder(t *testing.T, got []hindsight.Step, n int, source string) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("delivered %d steps, want %d", len(got), n)
	}
	base := time.Date(2026, 11, 30, 9, 0, 0, 123456789, time.UTC)
	for i, s := range got {
		if s.Seq != uint64(i+1) || s.Source != source {
			t.Fatalf("step %d: source %q seq %d, want %q %d", i, s.Source, s.Seq, source, i+1)
		}
		if !s.StartedAt.Equal(base.Add(time.Duration(i) * time.Second)) {
			t.Fatalf("step %d: started_at %v lost its original timestamp", i, s.StartedAt)
		}
		if strings.Contains(string(s.Request), "-secret") {
			t.Fatalf("step %d: token not redacted: %s", i, s.Request)
		}
	}
}

func TestRecorderDeliversInOrder(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &collector{}
	reg := prometheus.NewRegistry()
	r, err := New(Options{Home: home, Server: "fs", Redactor: testRedactor(t), Deliverer: d, Logger: quietLogger(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges(500) {
		r.Hook(ex)
	}
	waitFor(t, "delivery", func() bool { return r.Stats().Delivered == 500 })
	st := r.Stats()
	if st.Captured != 500 || st.Delivered != 500 || st.Redactions != 500 || st.Dropped != 0 || st.Depth != 0 {
		t.Errorf("stats %+v", st)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) < 10 {
		t.Errorf("metrics: %d families, %v", len(mfs), err)
	}
	dir := filepath.Join(home.Outboxes(), r.Source())
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkInOrder(t, d.got(), 500, r.Source())
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("emptied outbox not removed: %v", err)
	}
	r.Hook(exchanges(1)[0]) // after Close: counted, not recorded
	if r.Stats().Dropped != 1 {
		t.Errorf("hook after close not counted")
	}
}

// TestOutboxOutage: the daemon is down for a while; steps wait in the
// outbox and arrive exactly once, in order, with their timestamps.
func TestOutboxOutage(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &collector{down: true}
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	exs := exchanges(300)
	for _, ex := range exs[:200] {
		r.Hook(ex)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "failed attempts", func() bool { return r.Stats().DeliveryFailures >= 2 })
	for _, ex := range exs[200:] {
		r.Hook(ex)
	}
	r.Sync(context.Background())
	if st := r.Stats(); st.Depth != 300 || st.Spilled == 0 {
		t.Errorf("during outage: %+v", st)
	}
	d.setDown(false)
	waitFor(t, "delivery after outage", func() bool { return r.Stats().Delivered == 300 })
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkInOrder(t, d.got(), 300, r.Source())
}

// TestOutboxRejected: a step the daemon refuses is set aside; the others
// are delivered, in order, and the refused one is kept in a file.
func TestOutboxRejected(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &collector{refuse: func(s hindsight.Step) bool { return s.Seq == 7 }}
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges(20) {
		r.Hook(ex)
	}
	waitFor(t, "delivery", func() bool { return r.Stats().Delivered == 19 && r.Stats().Rejected == 1 })
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, s := range d.got() {
		want := uint64(i + 1)
		if want >= 7 {
			want++
		}
		if s.Seq != want {
			t.Fatalf("delivered seq %d at %d, want %d", s.Seq, i, want)
		}
		// Stored compact, delivered whole.
		if !strings.HasPrefix(string(s.Arguments), `{"path":"/p/`) || !strings.HasPrefix(string(s.Result), `{"content":`) {
			t.Fatalf("step %d delivered without its bodies: arguments %s, result %s", s.Seq, s.Arguments, s.Result)
		}
	}
	if st := r.Stats(); st.Rejected != 1 {
		t.Errorf("rejected %d", st.Rejected)
	}
	b, err := os.ReadFile(filepath.Join(home.Outboxes(), ".rejected", r.Source()+".jsonl"))
	if err != nil || !strings.Contains(string(b), `"seq":7`) || !strings.Contains(string(b), `"arguments":{"path":"/p/6"`) || strings.Contains(string(b), `"derived"`) {
		t.Errorf("refused step not kept whole: %v %s", err, b)
	}
}

// TestDrainOrphans: an outbox left by a sidecar that could not deliver is
// drained by the next one; a live sidecar's outbox is left alone; a
// corrupt one is moved aside.
func TestDrainOrphans(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	dead, err := New(Options{Home: home, Redactor: testRedactor(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges(50) {
		dead.Hook(ex)
	}
	dead.Sync(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	dead.Close(ctx) // no deliverer: the steps stay
	cancel()

	live, err := New(Options{Home: home, Redactor: testRedactor(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	live.Hook(exchanges(1)[0])
	live.Sync(context.Background())

	corrupt := filepath.Join(home.Outboxes(), "20260101T000000.000000-1-deadbeef")
	os.MkdirAll(filepath.Join(corrupt, dbName), 0o700)
	os.WriteFile(filepath.Join(corrupt, dbName, "MANIFEST"), []byte("not a manifest at all"), 0o600)

	// The daemon is down: nothing is lost, the orphan stays.
	down := &collector{down: true}
	if _, err := DrainOrphans(context.Background(), home, down); err == nil {
		t.Fatal("drain with the daemon down reported success")
	}
	d := &collector{}
	n, err := DrainOrphans(context.Background(), home, d)
	if err != nil {
		t.Fatal(err)
	}
	if n != 50 {
		t.Errorf("drained %d, want 50", n)
	}
	checkInOrder(t, d.got(), 50, dead.Source())
	if _, err := os.Stat(filepath.Join(home.Outboxes(), dead.Source())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("drained orphan not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home.Outboxes(), live.Source())); err != nil {
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
	d := &collector{down: true}
	c := &counters{}
	o, err := openOutbox(OutboxOptions{Home: home, Deliverer: d, Logger: quietLogger(), MaxHeld: 5, JournalPersistAfter: 20 * time.Millisecond}, c)
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
	waitFor(t, "the failed write", func() bool { return c.snapshot().WriteErrors > 0 })
	if st := c.snapshot(); st.Held != 5 || st.Dropped != 3 || st.Depth != 5 {
		t.Errorf("stats %+v", st)
	}
	d.setDown(false)
	waitFor(t, "delivery from memory", func() bool { return c.delivered.Load() == 5 })
	for i, s := range d.got() {
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
	d := &slowCollector{}
	c := &counters{}
	// A deadline far beyond delivery's linger, so that a loaded machine
	// does not make the first part fail.
	const persistAfter = 500 * time.Millisecond
	o, err := openOutbox(OutboxOptions{Home: home, Deliverer: d, Logger: quietLogger(), PersistAfter: persistAfter, JournalPersistAfter: persistAfter}, c)
	if err != nil {
		t.Fatal(err)
	}
	step := func() []hindsight.Step { return []hindsight.Step{{Method: "tools/call", EndedAt: time.Now()}} }
	for range 20 {
		o.Append(step())
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, "delivery", func() bool { return c.delivered.Load() == 20 })
	if _, err := os.Stat(filepath.Join(o.Dir(), dbName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("database created while the daemon kept up: %v", err)
	}
	if o.db.Load() != nil || c.spilled.Load() != 0 {
		t.Fatalf("steps written while the daemon kept up: %+v", c.snapshot())
	}

	d.setDelay(2 * persistAfter)
	o.Append(step())
	waitFor(t, "the step on disk", func() bool { return c.spilled.Load() == 1 })
	if o.db.Load() == nil {
		t.Fatal("no database")
	}
	waitFor(t, "delivery", func() bool { return c.delivered.Load() == 21 })
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("emptied outbox not removed: %v", err)
	}
	if got := d.count(); got != 21 {
		t.Errorf("delivered %d steps, want 21", got)
	}
}

// TestOutboxClosesIdleDisk: a database opened because the daemon answered
// late is closed and removed once everything in it was delivered and
// nothing was written for idleDisk, and opened again when needed; a
// refused step kept in it keeps it open.
func TestOutboxClosesIdleDisk(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &slowCollector{delay: 200 * time.Millisecond}
	c := &counters{}
	o, err := openOutbox(OutboxOptions{Home: home, Deliverer: d, Logger: quietLogger(), PersistAfter: 20 * time.Millisecond, JournalPersistAfter: 20 * time.Millisecond}, c)
	if err != nil {
		t.Fatal(err)
	}
	dbDir := filepath.Join(o.Dir(), dbName)
	late := func(n int64) {
		t.Helper()
		d.setDelay(200 * time.Millisecond)
		o.Append([]hindsight.Step{{Method: "tools/call", EndedAt: time.Now()}})
		waitFor(t, "the step on disk", func() bool { return c.spilled.Load() == n })
		d.setDelay(0)
		waitFor(t, "delivery", func() bool { return c.delivered.Load() == n })
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
	if got := d.count(); got != 2 {
		t.Errorf("delivered %d steps, want 2", got)
	}
}

// TestOutboxJournalBacklog: steps are journaled until a backlog builds
// up (half of MaxMemBytes); the steps after it are written to Badger PersistAfter after their
// exchange, and the journaled ones before them, due much later, do not
// hold them back. The journal keeps only what is in memory alone.
func TestOutboxJournalBacklog(t *testing.T) {
	o, c := openStalled(t, OutboxOptions{PersistAfter: 20 * time.Millisecond, JournalPersistAfter: time.Hour, MaxMemBytes: 2 << 20})
	text := strings.Repeat("x", 4<<10)
	batch := func(n int) []hindsight.Step {
		out := make([]hindsight.Step, n)
		for i := range out {
			out[i] = hindsight.Step{Method: "tools/call", EndedAt: time.Now(), Arguments: json.RawMessage(`"` + text + `"`)}
		}
		return out
	}
	o.Append(batch(300)) // ~1.2 MB: journaled, due in an hour
	journaled, _ := readJournal(o.Dir(), quietLogger())
	if len(journaled) != 300 || c.spilled.Load() != 0 {
		t.Fatalf("journaled %d, written %d; want 300, 0", len(journaled), c.spilled.Load())
	}
	o.Append(batch(1)) // a backlog now: due in 20 ms, and the rest with it
	waitFor(t, "the backlog on disk", func() bool { return c.spilled.Load() == 301 })
	journaled, _ = readJournal(o.Dir(), quietLogger())
	if len(journaled) != 0 {
		t.Errorf("journal still holds %d steps that are in the database", len(journaled))
	}
}

// openStalled opens an outbox with opts whose daemon never answers, closed
// (without waiting for it) when the test ends.
func openStalled(t *testing.T, opts OutboxOptions) (*Outbox, *counters) {
	t.Helper()
	opts.Home, opts.Deliverer, opts.Logger = hindsight.Home(t.TempDir()), &slowCollector{delay: time.Hour}, quietLogger()
	c := &counters{}
	o, err := openOutbox(opts, c)
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

// slowCollector acknowledges every batch after its delay.
type slowCollector struct {
	mu    sync.Mutex
	delay time.Duration
	n     int
}

func (c *slowCollector) Deliver(ctx context.Context, steps []hindsight.Step) error {
	c.mu.Lock()
	d := c.delay
	c.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(steps)
	return nil
}

func (c *slowCollector) setDelay(d time.Duration) { c.mu.Lock(); c.delay = d; c.mu.Unlock() }

func (c *slowCollector) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

func TestOutboxRetention(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	c := &counters{}
	o, err := openOutbox(OutboxOptions{Home: home, Logger: quietLogger(), Retention: time.Hour}, c)
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

// TestSecretsNeverReachDisk records the whole corpus with no daemon, so
// every step stays in Badger, then scans every file under the home
// (value logs, tables, WAL) for each planted secret.
func TestSecretsNeverReachDisk(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	sess := &proxy.Session{ID: "s", Server: "x", Transport: "stdio"}
	cases := loadCorpus(t)
	for _, c := range cases {
		ex := &proxy.Exchange{Session: sess, Direction: hindsight.ClientToServer, Started: time.Now(), Ended: time.Now()}
		if strings.Contains(string(c.Message), `"method"`) {
			ex.Method, ex.Request = "tools/call", c.Message
			ex.Response = []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
		} else {
			ex.Method, ex.Request = "tools/call", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`)
			ex.Response = c.Message
		}
		r.Hook(ex)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r.Close(ctx)
	if st := r.Stats(); st.Captured != int64(len(cases)) || st.Depth != int64(len(cases)) {
		t.Fatalf("stats %+v", st)
	}
	var files []string
	filepath.WalkDir(string(home), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 2 {
		t.Fatalf("nothing on disk: %v", files)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, c := range cases {
			for _, s := range c.MustNotContain {
				if strings.Contains(string(b), s) || strings.Contains(string(b), jsonEscaped(s)) {
					t.Errorf("%s: secret of %s (%.10s…) on disk", filepath.Base(f), c.Name, s)
				}
			}
		}
	}
	// The steps themselves are intact JSON.
	d := &collector{}
	if n, err := DrainOrphans(context.Background(), home, d); err != nil || n != len(cases) {
		t.Fatalf("drained %d of %d: %v", n, len(cases), err)
	}
	for _, s := range d.got() {
		if !json.Valid(s.Request) || (len(s.Response) > 0 && !json.Valid(s.Response)) {
			t.Errorf("step %d: invalid JSON", s.Seq)
		}
	}
}

// TestRecorderDropsWhenQueueFull: with a tiny queue bound and no spill,
// or a spill over its bound, Hook never waits; what does not fit is
// counted as dropped, and what is recorded is still numbered without gaps.
func TestRecorderDropsWhenQueueFull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxSpill int64
	}{
		{"no spill", -1},
		{"spill over its bound", 20 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := hindsight.Home(t.TempDir())
			d := &collector{}
			r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: quietLogger(),
				MaxQueueBytes: 8 << 10, Workers: 1, MaxSpillBytes: tc.maxSpill})
			if err != nil {
				t.Fatal(err)
			}
			exs := exchanges(2000)
			for _, ex := range exs {
				r.Hook(ex)
			}
			if err := r.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := r.Stats()
			if st.Dropped == 0 || st.Captured+st.Dropped != 2000 || (tc.maxSpill > 0) != (st.ExchangesSpilled > 0) {
				t.Fatalf("stats %+v", st)
			}
			waitFor(t, "delivery", func() bool { return r.Stats().Delivered == st.Captured })
			if err := r.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i, s := range d.got() {
				if s.Seq != uint64(i+1) {
					t.Fatalf("gap at %d: seq %d", i, s.Seq)
				}
			}
		})
	}
}

// rawCollector is a collector that is also a RawDeliverer: it keeps the
// encodings it is given, decoded, and counts the calls of each kind.
type rawCollector struct {
	collector
	rawCalls int
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
	c.mu.Lock()
	c.rawCalls++
	c.mu.Unlock()
	return c.collector.Deliver(ctx, steps)
}

// TestOutboxDeliversRaw: a RawDeliverer gets the stored encodings, in
// order, including after an outage (read back from disk) and around a
// refused step.
func TestOutboxDeliversRaw(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &rawCollector{collector: collector{down: true, refuse: func(s hindsight.Step) bool { return s.Seq == 5 }}}
	ob, err := openOutbox(OutboxOptions{Home: home, Deliverer: d, Logger: quietLogger(), MaxMemBytes: 1}, &counters{})
	if err != nil {
		t.Fatal(err)
	}
	var steps []hindsight.Step
	for i := range 40 {
		steps = append(steps, hindsight.Step{Method: "tools/call", Tool: "echo", Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), EndedAt: time.Now()})
	}
	steps[4].Arguments = json.RawMessage("{\n  \"i\": 4\n}") // pretty, as an HTTP body may be
	ob.Append(steps[:20])
	waitFor(t, "a failed attempt", func() bool { return ob.c.deliveryFailures.Load() >= 1 })
	ob.Append(steps[20:])
	d.setDown(false)
	waitFor(t, "delivery", func() bool { return ob.c.delivered.Load() == 39 && ob.c.rejected.Load() == 1 })
	if err := ob.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The refused step is kept as one line of compact JSON.
	b, err := os.ReadFile(filepath.Join(home.Outboxes(), ".rejected", ob.ID()+".jsonl"))
	if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); err != nil || len(lines) != 1 ||
		!json.Valid([]byte(lines[0])) || !strings.Contains(lines[0], `"arguments":{"i":4}`) || !strings.Contains(lines[0], `"seq":5`) {
		t.Errorf("refused step not kept as a line: %v %q", err, b)
	}
	got := d.got()
	if len(got) != 39 || d.rawCalls == 0 {
		t.Fatalf("got %d steps in %d raw calls", len(got), d.rawCalls)
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

// TestRecorderHandsOffInBatches: while the outbox journals, queued
// exchanges wait for the hand-off linger (here an hour) unless a full
// batch is waiting or Sync asks for them; Close hands over the rest. Without a deliverer the
// outbox cannot journal, and the hand-off comes after commitLinger.
func TestRecorderHandsOffInBatches(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &collector{}
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	r.in.handOff = time.Hour
	exs := exchanges(handOffBatch + 10)
	for _, ex := range exs[:handOffBatch-1] {
		r.Hook(ex)
	}
	time.Sleep(100 * time.Millisecond)
	if st := r.Stats(); st.Captured != 0 {
		t.Fatalf("%d steps captured before the linger or a full batch", st.Captured)
	}
	r.Hook(exs[handOffBatch-1])
	waitFor(t, "a full batch handed over", func() bool { return r.Stats().Captured == handOffBatch })
	for _, ex := range exs[handOffBatch : handOffBatch+5] {
		r.Hook(ex)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Sync(ctx); err != nil {
		t.Fatalf("Sync waited for the linger: %v", err)
	}
	if st := r.Stats(); st.Captured != handOffBatch+5 {
		t.Fatalf("%d steps captured after Sync, want %d", st.Captured, handOffBatch+5)
	}
	for _, ex := range exs[handOffBatch+5:] {
		r.Hook(ex)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkInOrder(t, d.got(), len(exs), r.Source())

	r, err = New(Options{Home: hindsight.Home(t.TempDir()), Redactor: testRedactor(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	r.in.handOff = time.Hour
	for _, ex := range exchanges(5) {
		r.Hook(ex)
	}
	waitFor(t, "steps handed over without a journal", func() bool { return r.Stats().Captured == 5 })
}
