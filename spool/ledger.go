package spool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// A ledger counts, where a killed process cannot undo it, the answered
// exchanges whose steps the outbox may not hold yet: those the Recorder
// left to its queue rather than journaling them before their answers
// (see capture.Recorder.Record). Two counters only ever grow: owed, added
// to before the answers are relayed, and settled, added to once such a
// step is safe (journaled, written to the database, delivered) or counted
// lost by another path (see losses). Whoever drains a dead sidecar's
// outbox counts owed − settled as lost (losses.Crash): no answered
// exchange is lost uncounted, whichever path it took.
//
// On Linux the file is mapped shared and a count is one atomic add on the
// mapping: the page cache keeps it when the process is killed. Elsewhere
// each count writes both counters with one pwrite(2) (see ledger_other.go).
//
// The file, ledger.bin in the outbox directory, is ledgerSize bytes: the
// magic ledgerMagic, then owed and settled as uint64 in the machine's
// byte order (the file never leaves the machine).
type ledger struct {
	f      *os.File
	mem    []byte        // the mapping; nil when written to
	owed   atomic.Uint64 // when written to: the counts, written after each change
	settle atomic.Uint64
	closed atomic.Bool
	wmu    sync.Mutex // when written to: orders the writes
}

const (
	ledgerName  = "ledger.bin"
	ledgerMagic = "HSLEDGR1"
	ledgerSize  = 24
	owedAt      = 8
	settledAt   = 16
)

// errLedger marks a ledger file that cannot be read: short, or not one.
var errLedger = errors.New("not an outbox ledger")

// openLedger creates the ledger of the outbox dir, at zero.
func openLedger(dir string) (*ledger, error) {
	path := filepath.Join(dir, ledgerName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create outbox ledger: %w", err)
	}
	var b [ledgerSize]byte
	copy(b[:], ledgerMagic)
	if _, err := f.Write(b[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("write outbox ledger: %w", err)
	}
	l := &ledger{f: f}
	if err := l.mapFile(); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// add adds n to the counter at off (owedAt or settledAt). A nil or closed
// ledger counts nothing.
func (l *ledger) add(off int, n int) {
	if l == nil || n <= 0 || l.closed.Load() {
		return
	}
	if l.mem != nil {
		addMapped(l.mem, off, uint64(n))
		return
	}
	c := &l.owed
	if off == settledAt {
		c = &l.settle
	}
	c.Add(uint64(n))
	l.write()
}

// close settles what the ledger owes (the outbox's owner accounted for
// every step it was handed: kept, delivered or counted lost) and stops
// counting. The mapping stays until the process exits: a relay may be
// adding to it concurrently.
func (l *ledger) close() {
	if l == nil || l.closed.Swap(true) {
		return
	}
	if l.mem != nil {
		owed, settled := loadMapped(l.mem, owedAt), loadMapped(l.mem, settledAt)
		if owed > settled {
			addMapped(l.mem, settledAt, owed-settled)
		}
	} else {
		l.settle.Store(l.owed.Load())
		l.write()
	}
	l.f.Close()
}

// write writes both counters to the file (the fallback where it is not
// mapped); a write that fails leaves the counts of the last one that did,
// a loss the drainer undercounts.
func (l *ledger) write() {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	var b [ledgerSize - owedAt]byte
	binary.NativeEndian.PutUint64(b[0:], l.owed.Load())
	binary.NativeEndian.PutUint64(b[8:], l.settle.Load())
	_, _ = l.f.WriteAt(b[:], owedAt)
}

// parseLedger returns the counters of a ledger file's contents.
func parseLedger(b []byte) (owed, settled uint64, err error) {
	if len(b) < ledgerSize {
		return 0, 0, fmt.Errorf("read outbox ledger: %d bytes: %w", len(b), errLedger)
	}
	if !bytes.Equal(b[:owedAt], []byte(ledgerMagic)) {
		return 0, 0, fmt.Errorf("read outbox ledger: bad magic: %w", errLedger)
	}
	owed = binary.NativeEndian.Uint64(b[owedAt:])
	settled = binary.NativeEndian.Uint64(b[settledAt:])
	if settled > owed {
		return owed, settled, fmt.Errorf("read outbox ledger: %d settled of %d owed: %w", settled, owed, errLedger)
	}
	return owed, settled, nil
}

// LedgerUnsettled reads the ledger of the outbox directory dir and
// returns how many answered exchanges it owes and has not settled: the
// steps lost, when dir's sidecar is dead. An outbox without a ledger owes
// nothing; one that cannot be read is an error (and owes 0).
func LedgerUnsettled(dir string) (int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, ledgerName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read outbox ledger: %w", err)
	}
	owed, settled, err := parseLedger(b)
	if err != nil {
		return 0, err
	}
	return int64(owed - settled), nil
}

// Owe counts n answered exchanges the caller leaves to a path that does
// not make their steps safe before their answers are relayed (capture's
// queue): call it before they are relayed, and hand their steps to
// AppendOwed, or Settle them once they are counted lost elsewhere. It is
// one atomic add on a shared file mapping (Linux).
func (o *Spool) Owe(n int) {
	if o != nil {
		o.led.add(owedAt, n)
	}
}

// Settle counts n exchanges Owe counted as accounted for outside the
// outbox: lost and counted (capture's drops), or written where a drainer
// counts them (capture's spill). Owe and Settle of a nil Spool count
// nothing.
func (o *Spool) Settle(n int) {
	if o != nil {
		o.led.add(settledAt, n)
	}
}

// settleOwed settles the owed entries of es and marks them settled. o.mu
// is held.
func (o *Spool) settleOwed(es []entry) {
	n := 0
	for i := range es {
		if es[i].owed {
			es[i].owed = false
			n++
		}
	}
	o.led.add(settledAt, n)
}
