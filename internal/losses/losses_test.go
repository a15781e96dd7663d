package losses

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLedgerScan(t *testing.T) {
	home := t.TempDir()
	a, err := Open(home, "a", "github")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(home, "b", "github")
	if err != nil {
		t.Fatal(err)
	}
	clean, err := Open(home, "c", "fs")
	if err != nil {
		t.Fatal(err)
	}
	a.Add(DiskFull, 5, "no room")
	b.Add(Rejected, 2, "bad step")
	b.Add(Truncated, 3, "cut")
	for _, l := range []*Ledger{a, b} {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// A ledger is written in place at its allocated size, before Close.
	if fi, err := os.Stat(a.Path()); err != nil || fi.Size() != fileSize {
		t.Fatalf("ledger file %v, %v; want %d bytes", fi, err, fileSize)
	}
	got := Scan(home)
	if len(got) != 1 || got[0].Server != "github" || got[0].Lost != 7 || got[0].Truncated != 3 || got[0].Sidecars != 2 ||
		got[0].Reasons[DiskFull] != 5 || got[0].LastReason != Truncated {
		t.Fatalf("Scan = %+v", got)
	}
	// A clean ledger is removed at Close; the others stay.
	clean.Close(true)
	a.Close(true)
	if _, err := os.Stat(filepath.Join(Dir(home), "c.json")); !os.IsNotExist(err) {
		t.Fatalf("a clean ledger stayed: %v", err)
	}
	if err := AddTo(home, "a", "", Crash, 4, "died"); err != nil {
		t.Fatal(err)
	}
	got = Scan(home)
	if got[0].Lost != 11 || got[0].Reasons[Crash] != 4 || got[0].LastReason != Crash {
		t.Fatalf("after AddTo, Scan = %+v", got)
	}
}
