package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/lab/spooltest"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/wire"
)

// unsettled reads the ledger of o's outbox.
func unsettled(t *testing.T, o *Spool) int64 {
	t.Helper()
	n, err := LedgerUnsettled(o.Dir())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLedgerOwesUntilSafe: what is owed stays unsettled until its step is
// journaled, written to the database, delivered or counted lost; Settle
// settles what was accounted for elsewhere.
func TestLedgerOwesUntilSafe(t *testing.T) {
	t.Run("journaled", func(t *testing.T) {
		o, _ := openStalled(t, Options{JournalPersistAfter: time.Hour})
		o.Owe(7)
		if n := unsettled(t, o); n != 7 {
			t.Fatalf("owed 7, nothing appended: %d unsettled", n)
		}
		o.AppendOwed(testSteps(5))
		if n := unsettled(t, o); n != 2 {
			t.Errorf("5 of 7 journaled: %d unsettled, want 2", n)
		}
		o.Settle(2)
		if n := unsettled(t, o); n != 0 {
			t.Errorf("all settled: %d unsettled", n)
		}
	})
	t.Run("written", func(t *testing.T) {
		// No journal: the steps wait in memory, owed, until PersistAfter
		// has them written to the database.
		o, c := openStalled(t, Options{PersistAfter: 150 * time.Millisecond})
		o.journalOn.Store(false)
		o.Owe(4)
		steps := testSteps(4)
		for i := range steps {
			steps[i].EndedAt = time.Now()
		}
		o.AppendOwed(steps)
		if c.spilled.Load() == 0 {
			if n := unsettled(t, o); n != 4 {
				t.Errorf("4 steps only in memory: %d unsettled, want 4", n)
			}
		}
		testkit.WaitFor(t, "the steps in the database", 10*time.Second, func() bool { return c.spilled.Load() == 4 })
		if n := unsettled(t, o); n != 0 {
			t.Errorf("written to the database: %d unsettled", n)
		}
	})
	t.Run("delivered", func(t *testing.T) {
		d := &spooltest.Collector{}
		o, err := Open(Options{Home: hindsight.Home(t.TempDir()), Deliverer: d, Logger: slog.New(slog.DiscardHandler),
			PersistAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close(context.Background())
		o.journalOn.Store(false)
		o.Owe(3)
		o.AppendOwed(testSteps(3))
		testkit.WaitFor(t, "the steps delivered", 10*time.Second, func() bool { return len(d.Got()) == 3 })
		testkit.WaitFor(t, "the delivered steps settled", 10*time.Second, func() bool { return unsettled(t, o) == 0 })
	})
}

// TestLedgerJournalFailsBeforeAnswer: steps AppendJournaled cannot
// journal are owed by the spool itself, before it returns, and settled
// once written.
func TestLedgerJournalFailsBeforeAnswer(t *testing.T) {
	o, c := openStalled(t, Options{PersistAfter: 150 * time.Millisecond})
	o.journalOn.Store(false)
	steps := testSteps(3)
	for i := range steps {
		steps[i].EndedAt = time.Now()
	}
	o.AppendJournaled(steps)
	if c.spilled.Load() == 0 {
		if n := unsettled(t, o); n != 3 {
			t.Errorf("3 steps the journal did not take: %d unsettled, want 3", n)
		}
	}
	o.Signal() // the answers are out
	testkit.WaitFor(t, "the steps in the database", 10*time.Second, func() bool { return c.spilled.Load() == 3 })
	if n := unsettled(t, o); n != 0 {
		t.Errorf("written: %d unsettled", n)
	}
}

// TestLedgerClosedOwesNothing: an outbox closed with undelivered steps
// stays for a drainer, and its ledger owes nothing (the steps are on disk).
func TestLedgerClosedOwesNothing(t *testing.T) {
	o, err := Open(Options{Home: hindsight.Home(t.TempDir()), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	o.Owe(5)
	o.AppendOwed(testSteps(5)) // no deliverer: written at once
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	o.Close(ctx)
	if _, err := os.Stat(filepath.Join(o.Dir(), ledgerName)); err != nil {
		t.Fatalf("the closed outbox's ledger: %v", err)
	}
	if n := unsettled(t, o); n != 0 {
		t.Errorf("closed with its steps on disk: %d unsettled", n)
	}
}

// deadOutbox makes the outbox of a dead sidecar under home: a journal
// holding steps 1..journaled, and a ledger owing owed, settled settled.
func deadOutbox(t *testing.T, home hindsight.Home, id string, journaled int, owed, settled int) string {
	t.Helper()
	dir := filepath.Join(home.Outboxes(), id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var seg []byte
	for seq := uint64(1); seq <= uint64(journaled); seq++ {
		at := spooltest.Base.Add(time.Duration(seq-1) * time.Second)
		s := hindsight.Step{Source: id, Seq: seq, Method: "tools/call", StartedAt: at, EndedAt: at}
		raw, err := wire.AppendCompactStep(nil, &s)
		if err != nil {
			t.Fatal(err)
		}
		seg = appendRecord(seg, seq, raw)
	}
	if err := os.WriteFile(filepath.Join(dir, journalPrefix+"0000000000000001"+journalSuffix), seg, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := openLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.add(owedAt, owed)
	l.add(settledAt, settled)
	l.f.Close() // killed: never closed
	return dir
}

// TestDrainCountsUnsettled: the drainer of a dead sidecar's outbox
// delivers what it holds and counts what its ledger owes unsettled as
// lost (crash), once, even when a first drain stops half way.
func TestDrainCountsUnsettled(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	deadOutbox(t, home, "dead", 3, 9, 4)
	down := &spooltest.Collector{}
	down.SetDown(true)
	if _, err := DrainOrphans(context.Background(), home, down, DrainOptions{}); err == nil {
		t.Fatal("drain with the daemon down reported success")
	}
	d := &spooltest.Collector{}
	if n, err := DrainOrphans(context.Background(), home, d, DrainOptions{}); err != nil || n != 3 {
		t.Fatalf("drained %d, %v; want 3", n, err)
	}
	l := losses.Scan(string(home))
	if len(l) != 1 || l[0].Lost != 5 || l[0].Reasons[losses.Crash] != 5 {
		t.Errorf("losses %+v, want the 5 unsettled counted once (crash)", l)
	}
}

// TestDrainBadLedger: a ledger that is short, torn or garbage is logged
// and counts nothing; the outbox is drained all the same.
func TestDrainBadLedger(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":   nil,
		"short":   []byte(ledgerMagic + "\x01\x00"),
		"garbage": bytes.Repeat([]byte{0xff}, 64),
		"settled more than owed": func() []byte {
			b := make([]byte, ledgerSize)
			copy(b, ledgerMagic)
			binary.NativeEndian.PutUint64(b[settledAt:], 3)
			return b
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			home := hindsight.Home(t.TempDir())
			dir := deadOutbox(t, home, "dead", 2, 0, 0)
			if err := os.WriteFile(filepath.Join(dir, ledgerName), data, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LedgerUnsettled(dir); !errors.Is(err, errLedger) {
				t.Errorf("read: %v, want errLedger", err)
			}
			d := &spooltest.Collector{}
			if n, err := DrainOrphans(context.Background(), home, d, DrainOptions{Logger: slog.New(slog.DiscardHandler)}); err != nil || n != 2 {
				t.Fatalf("drained %d, %v; want 2", n, err)
			}
			if l := losses.Scan(string(home)); len(l) != 0 {
				t.Errorf("losses %+v, want none", l)
			}
		})
	}
}

// FuzzParseLedger: any file content reads as counters or an error, never
// a panic, and what reads never settles more than it owes.
func FuzzParseLedger(f *testing.F) {
	ok := make([]byte, ledgerSize)
	copy(ok, ledgerMagic)
	binary.NativeEndian.PutUint64(ok[owedAt:], 9)
	binary.NativeEndian.PutUint64(ok[settledAt:], 4)
	f.Add(ok)
	f.Add(ok[:ledgerSize-3])
	f.Add([]byte{})
	f.Add([]byte("HSLEDGR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		owed, settled, err := parseLedger(b)
		if err == nil && (settled > owed || len(b) < ledgerSize) {
			t.Fatalf("read %d settled of %d owed from %d bytes without an error", settled, owed, len(b))
		}
		if err != nil && !errors.Is(err, errLedger) {
			t.Fatalf("error %v is not errLedger", err)
		}
	})
}

// BenchmarkLedgerOwe measures what the relay pays to owe an exchange (an
// atomic add on the mapped ledger), beside an atomic add on the heap in
// the same run (the baseline).
func BenchmarkLedgerOwe(b *testing.B) {
	o, err := Open(Options{Home: hindsight.Home(b.TempDir()), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close(context.Background())
	b.Run("ledger", func(b *testing.B) {
		for b.Loop() {
			o.Owe(1)
		}
	})
	b.Run("heap-atomic", func(b *testing.B) {
		var n atomic.Uint64
		for b.Loop() {
			n.Add(1)
		}
	})
}

// TestLedgerWritten: the written ledger (where it is not mapped) reads
// back as counted, and closes settled.
func TestLedgerWritten(t *testing.T) {
	dir := t.TempDir()
	mapped, err := openLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{f: mapped.f} // the fallback: each count one pwrite
	l.add(owedAt, 5)
	l.add(settledAt, 2)
	if n, err := LedgerUnsettled(dir); err != nil || n != 3 {
		t.Fatalf("written ledger: %d unsettled, %v; want 3", n, err)
	}
	l.close()
	l.add(owedAt, 1) // closed: counts nothing
	if n, err := LedgerUnsettled(dir); err != nil || n != 0 {
		t.Errorf("closed: %d unsettled, %v; want 0", n, err)
	}
}

// TestListUnsettled: List shows what a dead sidecar's ledger owes, and
// nothing for a live one's.
func TestListUnsettled(t *testing.T) {
	home := hindsight.Home(t.TempDir())
	deadOutbox(t, home, "dead", 1, 6, 2)
	live, err := Open(Options{Home: home, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close(context.Background())
	live.Owe(3)
	got := map[string]int64{}
	for _, o := range List(home) {
		got[o.Name] = o.Unsettled
	}
	if got["dead"] != 4 || got[live.ID()] != 0 || len(got) != 2 {
		t.Errorf("unsettled by outbox %v, want dead 4 and the live one 0", got)
	}
}
