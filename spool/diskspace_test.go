package spool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// TestOutboxDiskShort: while the filesystem has less than the reserve free
// (here a reserve no disk has), the outbox writes nothing, not even to open
// its database, holds steps in memory up to MaxHeld, drops the newest past
// it and counts them as disk-full; once there is room it writes what it
// held, and delivers everything else in order.
func TestOutboxDiskShort(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{}
	d.SetDown(true)
	ob, err := open(Options{Home: home, Deliverer: d, Logger: slog.New(slog.DiscardHandler), MaxHeld: 10, DiskReserve: 1 << 60}, &counters{})
	if err != nil {
		t.Fatal(err)
	}
	step := func(i int) hindsight.Step {
		return hindsight.Step{Method: "tools/call", Tool: "echo", Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), EndedAt: time.Now()}
	}
	ob.Append([]hindsight.Step{step(0)})
	testkit.WaitFor(t, "a failed delivery", 20*time.Second, func() bool { return ob.c.deliveryFailures.Load() >= 1 })
	for i := 1; i < 30; i++ {
		ob.Append([]hindsight.Step{step(i)})
	}
	testkit.WaitFor(t, "steps held and dropped", 20*time.Second, func() bool { return ob.c.held.Load() == 10 && ob.c.losses.DiskFull() == 20 })
	if _, err := os.Stat(filepath.Join(ob.Dir(), dbName)); !os.IsNotExist(err) {
		t.Fatalf("the database was opened on a short disk: %v", err)
	}
	if ob.c.writeErrors.Load() != 0 {
		t.Errorf("a short disk counted %d write errors", ob.c.writeErrors.Load())
	}
	// Room again: what is held is written (within persistLoop's second),
	// then delivered once the daemon answers.
	ob.store.diskReserve.Store(1)
	testkit.WaitFor(t, "the held steps written", 20*time.Second, func() bool { return ob.c.held.Load() == 0 && ob.c.spilled.Load() >= 10 })
	d.SetDown(false)
	testkit.WaitFor(t, "delivery", 20*time.Second, func() bool { return ob.c.delivered.Load() == 10 })
	if err := ob.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, s := range d.Got() {
		if s.Seq != uint64(i+1) || string(s.Arguments) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("delivered %d: seq %d arguments %s", i, s.Seq, s.Arguments)
		}
	}
}

// TestOutboxClosedShortCountsUnjournaled: steps handed to AppendJournaled
// while the disk is short of space are neither journaled nor written;
// when the outbox closes with them in memory they are counted lost
// (disk-full), not left uncounted behind a journal that does not hold
// them.
func TestOutboxClosedShortCountsUnjournaled(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	d := &spooltest.Collector{}
	d.SetDown(true)
	ob, err := open(Options{Home: home, Deliverer: d, Logger: slog.New(slog.DiscardHandler)}, &counters{})
	if err != nil {
		t.Fatal(err)
	}
	ob.AppendJournaled([]hindsight.Step{{Method: "tools/call", Tool: "echo", EndedAt: time.Now()}}) // journaled
	ob.store.diskReserve.Store(1 << 60)
	ob.jr.checkedAt = time.Time{} // the next journal write checks the disk
	for range 3 {
		ob.AppendJournaled([]hindsight.Step{{Method: "tools/call", Tool: "echo", EndedAt: time.Now()}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	ob.Close(ctx)
	if got := ob.c.losses.DiskFull(); got != 3 {
		t.Errorf("%d steps counted lost to a full disk, want the 3 not journaled", got)
	}
	if segs, _ := filepath.Glob(filepath.Join(ob.Dir(), journalPrefix+"*")); len(segs) == 0 {
		t.Error("the journal holding the first step was removed")
	}
}
