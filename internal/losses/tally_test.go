package losses

import (
	"path/filepath"
	"testing"
)

// TestTally: losses are counted (disk-full ones twice), notes are not, and
// both reach the ledger once it is set.
func TestTally(t *testing.T) {
	var tl Tally
	tl.Lose(QueueFull, 2, "before the ledger")
	tl.Lose(DiskFull, 0, "nothing")
	home := t.TempDir()
	l, err := Open(home, "src", "fs")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(false)
	tl.SetLedger(l)
	tl.Lose(DiskFull, 3, "disk")
	tl.Note(Truncated, 1, "cut")
	if tl.Lost() != 5 || tl.DiskFull() != 3 {
		t.Fatalf("lost %d, disk-full %d; want 5, 3", tl.Lost(), tl.DiskFull())
	}
	r := l.Snapshot()
	if r.Counts[QueueFull] != 0 || r.Counts[DiskFull] != 3 || r.Counts[Truncated] != 1 {
		t.Fatalf("ledger counts %v; want only what came after SetLedger", r.Counts)
	}
	if tl.Ledger() != l || filepath.Dir(l.Path()) != Dir(home) {
		t.Fatalf("ledger %v at %s", tl.Ledger(), l.Path())
	}
}
