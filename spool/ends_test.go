package spool

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
)

// endCollector is a Collector that also takes ends (an Ender), noting how
// many steps it had when each end came.
type endCollector struct {
	spooltest.Collector
	mu     sync.Mutex
	ends   []End
	before []int // steps delivered before each end
	fail   bool
}

func (c *endCollector) DeliverEnd(ctx context.Context, source string, e End) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.before = append(c.before, len(c.Got()))
	if c.fail {
		return errors.New("dial unix hindsight.sock: connect: connection refused")
	}
	c.ends = append(c.ends, e)
	return nil
}

// TestEndsTravelWithSteps: ends noted in an outbox whose sidecar could not
// deliver keep the outbox at Close; its drainer delivers them after all
// its steps, in the order noted, and only then removes the outbox. A
// drainer whose daemon refuses the ends leaves them for the next.
func TestEndsTravelWithSteps(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	dead, err := Open(Options{Home: home, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	dead.Append(testSteps(20))
	want := []End{{Final: true, TaskID: "t1", LastSeq: 20}, {SessionID: "s1", LastSeq: 20}}
	for _, e := range want {
		if err := dead.NoteEnd(e); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	dead.Close(ctx)
	if !hasEnds(dead.Dir()) {
		t.Fatal("the outbox's ends are gone at Close")
	}

	refusing := &endCollector{fail: true}
	if _, err := DrainOrphans(context.Background(), home, refusing, DrainOptions{}); err == nil {
		t.Fatal("a drain whose ends were refused reported success")
	}
	if !hasEnds(dead.Dir()) {
		t.Fatal("refused ends are gone")
	}
	// The steps went first; the first end was tried after all of them.
	if len(refusing.before) != 1 || refusing.before[0] != 20 {
		t.Errorf("the end was tried after %v steps of 20", refusing.before)
	}

	d := &endCollector{}
	if _, err := DrainOrphans(context.Background(), home, d, DrainOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(d.ends) != len(want) || d.ends[0] != want[0] || d.ends[1] != want[1] {
		t.Fatalf("ends delivered %+v, want %+v", d.ends, want)
	}
	if _, err := os.Stat(dead.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("drained outbox not removed: %v", err)
	}
}

// TestEndsOnlyOutbox: an outbox that delivered all its steps but not its
// end (the daemon went away before it) stays for its drainer, which tells
// the end and removes it.
func TestEndsOnlyOutbox(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	c := &spooltest.Collector{}
	o, err := Open(Options{Home: home, Deliverer: c, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	o.Append(testSteps(3))
	if err := o.NoteEnd(End{SessionID: "s1", LastSeq: 3}); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(c.Got()) != 3 {
		t.Fatalf("delivered %d steps, want 3", len(c.Got()))
	}
	d := &endCollector{}
	if _, err := DrainOrphans(context.Background(), home, d, DrainOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(d.ends) != 1 || d.ends[0].SessionID != "s1" {
		t.Errorf("ends: %+v", d.ends)
	}
	if _, err := os.Stat(o.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("outbox not removed: %v", err)
	}
}

// FuzzDeliverEnds: whatever an ends file holds (a line cut by a crash, a
// foreign file), delivering it never panics, delivers only what parses,
// and leaves no file behind once all was delivered.
func FuzzDeliverEnds(f *testing.F) {
	f.Add([]byte(`{"session_id":"s1","last_seq":3}` + "\n" + `{"task_id":"t","final":true,"last_seq":4}` + "\n"))
	f.Add([]byte(`{"session_id":"s1","last_seq":3}` + "\n" + `{"task_id":"t","fin`))
	f.Add([]byte("\n\n{}\nnull\n[1,2]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, endsName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		d := &endCollector{}
		if err := deliverEnds(context.Background(), dir, "id", d); err != nil {
			t.Fatal(err)
		}
		if hasEnds(dir) {
			t.Error("ends left after a delivery that succeeded")
		}
	})
}
