package losses

import "sync/atomic"

// A Tally counts the steps a part of a sidecar lost, and writes each loss
// to a Ledger once one is set. It is safe for concurrent use; the zero
// Tally counts without a ledger.
type Tally struct {
	lost, diskFull atomic.Int64
	ledger         atomic.Pointer[Ledger]
}

// SetLedger makes t record its losses (and Note's) in l from now on.
func (t *Tally) SetLedger(l *Ledger) { t.ledger.Store(l) }

// Ledger is the ledger t records in, or nil.
func (t *Tally) Ledger() *Ledger { return t.ledger.Load() }

// Lose counts n steps lost for reason (DiskFull ones also in DiskFull) and
// records them in the ledger; detail says more.
func (t *Tally) Lose(reason string, n int64, detail string) {
	if n <= 0 {
		return
	}
	t.lost.Add(n)
	if reason == DiskFull {
		t.diskFull.Add(n)
	}
	t.ledger.Load().Add(reason, n, detail)
}

// Note records n steps for reason in the ledger without counting them as
// lost here: a step cut, refused or expired, which other counters count.
func (t *Tally) Note(reason string, n int64, detail string) { t.ledger.Load().Add(reason, n, detail) }

// Lost is how many steps t counted lost.
func (t *Tally) Lost() int64 { return t.lost.Load() }

// DiskFull is how many of Lost were lost because the disk was short of
// space.
func (t *Tally) DiskFull() int64 { return t.diskFull.Load() }
