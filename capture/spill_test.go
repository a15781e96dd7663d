package capture

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/spool"
)

// plantedSecret is in every exchange of the spill tests.
const plantedSecret = "ghp_R7pLq2VxW9mZt4Kc8NbY3hJd6FsA1eQo5Ui0"

func secretExchanges(n int) []*proxy.Exchange {
	exs := exchanges(n)
	for _, ex := range exs {
		ex.Request = bytes.Replace(ex.Request, []byte(`"path"`), []byte(`"note":"use `+plantedSecret+`","path"`), 1)
		ex.Response = bytes.Replace(ex.Response, []byte(`"line `), []byte(`"`+plantedSecret+` line `), 1)
	}
	return exs
}

// scanFor reports the files under root that hold s.
func scanFor(t *testing.T, root, s string) []string {
	t.Helper()
	var hits []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(s)) {
			hits = append(hits, path)
		}
		return nil
	})
	return hits
}

// TestSpillSealsAndReadsBackInOrder: spilled exchanges are on disk only as
// ciphertext, in files only the owner can read, and come back intact and
// in order; read-through segments are deleted.
func TestSpillSealsAndReadsBackInOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	c := &counters{}
	sp, err := openSpill(dir, 1<<30, make(chan struct{}, 1), slog.New(slog.DiscardHandler), c)
	if err != nil {
		t.Fatal(err)
	}
	exs := secretExchanges(50)
	exs[3].Injected = []hindsight.Injection{{Channel: "instructions", ExperienceIDs: []string{"e1"}, Tokens: 12}}
	exs[4].Response, exs[4].Failure, exs[4].Cancelled = nil, "server exited", true
	for _, ex := range exs {
		if err := putNow(sp, ex); err != nil {
			t.Fatal(err)
		}
	}
	if hits := scanFor(t, dir, plantedSecret); len(hits) > 0 {
		t.Fatalf("planted secret readable in %v", hits)
	}
	if hits := scanFor(t, dir, "read_file"); len(hits) > 0 {
		t.Fatalf("spilled text readable in %v", hits)
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if fi, err := d.Info(); err == nil && !d.IsDir() && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", path, fi.Mode().Perm())
		}
		return nil
	})
	for i, want := range exs {
		got, ok, err := sp.next()
		if !ok || err != nil {
			t.Fatalf("record %d: ok %v err %v", i, ok, err)
		}
		if !bytes.Equal(got.Request, want.Request) || !bytes.Equal(got.Response, want.Response) || got.Session != want.Session ||
			!got.Started.Equal(want.Started) || !got.Ended.Equal(want.Ended) || got.Method != want.Method ||
			got.Failure != want.Failure || got.Cancelled != want.Cancelled || len(got.Injected) != len(want.Injected) {
			t.Fatalf("record %d: got %+v, want %+v", i, got, want)
		}
	}
	if _, ok, _ := sp.next(); ok {
		t.Fatal("a record past the end")
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 || c.spillBytes.Load() != 0 {
		t.Errorf("read-through spill left %d files, %d bytes", len(files), c.spillBytes.Load())
	}
	// The next exchange starts a new segment.
	if err := putNow(sp, exs[0]); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := sp.next(); !ok || err != nil || !bytes.Equal(got.Request, exs[0].Request) {
		t.Fatalf("after a new segment: %v %v", ok, err)
	}
	if n := sp.close(); n != 0 {
		t.Errorf("%d records unread", n)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("spill directory left: %v", err)
	}
}

// TestSpillBound: past MaxSpillBytes a spill refuses exchanges.
func TestSpillBound(t *testing.T) {
	sp, err := openSpill(filepath.Join(t.TempDir(), "spill"), 2000, make(chan struct{}, 1), slog.New(slog.DiscardHandler), &counters{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	n := 0
	for _, ex := range exchanges(100) {
		if putNow(sp, ex) == nil {
			n++
		}
	}
	if n == 0 || n == 100 {
		t.Fatalf("%d of 100 spilled under a 2000-byte bound", n)
	}
}

// TestRecorderSpillsWhenQueueFull: a flood into a tiny queue spills
// instead of dropping; no planted secret is readable anywhere under the
// home while it spills; every exchange is recorded exactly once, in order,
// with its original timestamps, redacted.
func TestRecorderSpillsWhenQueueFull(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{}
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: slog.New(slog.DiscardHandler), MaxQueueBytes: 8 << 10, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for _, ex := range secretExchanges(n) {
		r.Hook(ex)
	}
	testkit.WaitFor(t, "a spilled exchange", 20*time.Second, func() bool { return r.Stats().ExchangesSpilled > 0 })
	if hits := scanFor(t, string(home), plantedSecret); len(hits) > 0 {
		t.Fatalf("planted secret readable in %v", hits)
	}
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.Dropped != 0 || st.Captured != n || st.ExchangesSpilled == 0 || st.ExchangesUnspilled != st.ExchangesSpilled {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("%d of %d exchanges spilled", st.ExchangesSpilled, n)
	testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return r.Stats().Delivered == n })
	// Owed by Hook, settled as spilled, owed again as read back, settled
	// as journaled or delivered: the outbox's ledger owes nothing.
	if owed, err := spool.LedgerUnsettled(r.outbox.Dir()); err != nil || owed != 0 {
		t.Errorf("every step delivered, the ledger owes %d (%v)", owed, err)
	}
	// Capture caught up: new exchanges take the queue again.
	if r.spill.active() {
		t.Error("still spilling after the spill was read back")
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := d.Got()
	spooltest.CheckInOrder(t, got, n, r.Source())
	for i, s := range got {
		if want := `"path":"/p/` + strconv.Itoa(i) + `"`; !strings.Contains(string(s.Request), want) {
			t.Fatalf("step %d out of order: %s", i, s.Request)
		}
		if strings.Contains(string(s.Request)+string(s.Response), plantedSecret) {
			t.Fatalf("step %d not redacted", i)
		}
	}
	if hits := scanFor(t, string(home), plantedSecret); len(hits) > 0 {
		t.Fatalf("planted secret readable in %v", hits)
	}
}

// TestRecorderSpillCloses: Close records what is still spilled.
func TestRecorderSpillCloses(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{}
	r, err := New(Options{Home: home, Redactor: testRedactor(t), Deliverer: d, Logger: slog.New(slog.DiscardHandler), MaxQueueBytes: 4 << 10, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges(500) {
		r.Hook(ex)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.ExchangesSpilled == 0 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
	spooltest.CheckInOrder(t, d.Got(), 500, r.Source())
	if _, err := os.Stat(filepath.Join(home.Outboxes(), r.Source())); !os.IsNotExist(err) {
		t.Errorf("outbox left after a clean close: %v", err)
	}
}

// TestDeadSpillDeletedAndCounted: the spill of a sidecar that died can
// never be opened (its key died with it): DrainOrphans deletes it, counts
// its exchanges and still delivers the outbox's steps.
func TestDeadSpillDeletedAndCounted(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	dead, err := New(Options{Home: home, Redactor: testRedactor(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges(20) {
		dead.Hook(ex)
	}
	dead.Sync(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	dead.Close(ctx) // no deliverer: the steps stay
	cancel()
	// What a sidecar killed while spilling leaves: sealed segments, one
	// of them torn.
	dir := dead.outbox.SpillDir()
	sp, err := openSpill(dir, 1<<30, make(chan struct{}, 1), slog.New(slog.DiscardHandler), &counters{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range secretExchanges(7) {
		if err := putNow(sp, ex); err != nil {
			t.Fatal(err)
		}
	}
	sp.segs[0].w.Write([]byte{0, 0, 1, 0, 42}) // a record cut short by the kill
	sp.segs[0].w.Close()

	before := SpillLost()
	d := &spooltest.Collector{}
	n, err := DrainOrphans(context.Background(), home, d, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != 20 {
		t.Errorf("drained %d steps, want 20", n)
	}
	if lost := SpillLost() - before; lost != 8 {
		t.Errorf("counted %d lost spilled exchanges, want 8", lost)
	}
	if _, err := os.Stat(filepath.Join(home.Outboxes(), dead.Source())); !os.IsNotExist(err) {
		t.Errorf("dead outbox not removed: %v", err)
	}
}

// putNow puts ex and writes it at once, as the spill writer does when it
// has caught up.
func putNow(sp *spill, ex *proxy.Exchange) error {
	if _, _, err := sp.put(ex); err != nil {
		return err
	}
	_, _, err := sp.flush()
	return err
}

// TestSpillReadBackExchangesOwnTheirBytes: the exchanges read back share
// no bytes with each other nor with the spill's buffers: kept until all
// are read, and then appended to, each still holds what was spilled.
func TestSpillReadBackExchangesOwnTheirBytes(t *testing.T) {
	sp := openTestSpill(t)
	exs := secretExchanges(20)
	for _, ex := range exs {
		if err := putNow(sp, ex); err != nil {
			t.Fatal(err)
		}
	}
	var got []*proxy.Exchange
	for range exs {
		ex, ok, err := sp.next()
		if !ok || err != nil {
			t.Fatalf("read back: ok %v err %v", ok, err)
		}
		got = append(got, ex)
	}
	const more = "appended past the field's end"
	for _, ex := range got {
		ex.ID = append(ex.ID, more...)
		ex.Request = append(ex.Request, more...)
	}
	for i, want := range exs {
		if !bytes.Equal(got[i].ID, append(append([]byte(nil), want.ID...), more...)) ||
			!bytes.Equal(got[i].Request, append(append([]byte(nil), want.Request...), more...)) ||
			!bytes.Equal(got[i].Response, want.Response) {
			t.Fatalf("exchange %d changed: id %s, request %q, response %q", i, got[i].ID, got[i].Request, got[i].Response)
		}
	}
}

// FuzzDecodeExchange: a spilled exchange decodes to what was encoded, and
// any other bytes decode or fail without a panic.
func FuzzDecodeExchange(f *testing.F) {
	sess := []*proxy.Session{{ID: "s"}}
	for _, ex := range exchanges(3) {
		f.Add(encodeExchange(nil, ex, 1))
	}
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ex, err := decodeExchange(append([]byte(nil), b...), sess)
		if err != nil {
			return
		}
		again, err := decodeExchange(encodeExchange(nil, ex, 1), sess)
		if err != nil {
			t.Fatalf("re-encoded exchange does not decode: %v", err)
		}
		if !bytes.Equal(again.ID, ex.ID) || !bytes.Equal(again.Request, ex.Request) || !bytes.Equal(again.Response, ex.Response) ||
			again.Method != ex.Method || again.Failure != ex.Failure || !again.Started.Equal(ex.Started) ||
			again.Cancelled != ex.Cancelled || (again.Response == nil) != (ex.Response == nil) {
			t.Fatalf("round trip: %+v, want %+v", again, ex)
		}
	})
}

// TestSpillLetsGoOfHugeScratch: the buffers put reuses do not keep a huge
// exchange's size for the spill's life, and what follows it is sealed
// and read back intact.
func TestSpillLetsGoOfHugeScratch(t *testing.T) {
	sp := openTestSpill(t)
	exs := exchanges(3)
	exs[1].Response = bytes.Repeat([]byte("x"), 2*spillScratchMax)
	for i, ex := range exs {
		if err := putNow(sp, ex); err != nil {
			t.Fatal(err)
		}
		if i == 1 && cap(sp.plain)+cap(sp.rec) != 0 {
			t.Fatalf("after a %d-byte exchange put keeps %d bytes of scratch", len(ex.Response), cap(sp.plain)+cap(sp.rec))
		}
	}
	for i, want := range exs {
		got, ok, err := sp.next()
		if !ok || err != nil || !bytes.Equal(got.Request, want.Request) || !bytes.Equal(got.Response, want.Response) {
			t.Fatalf("exchange %d: ok %v err %v", i, ok, err)
		}
	}
}

// openTestSpill opens a spill of a gigabyte's bound in a temporary
// directory, closed when the test ends.
func openTestSpill(t *testing.T) *spill {
	t.Helper()
	sp, err := openSpill(filepath.Join(t.TempDir(), "spill"), 1<<30, make(chan struct{}, 1), slog.New(slog.DiscardHandler), &counters{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.close() })
	return sp
}
