package badgerdb

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openDB(t *testing.T) *badger.DB {
	t.Helper()
	db, err := badger.Open(Options(t.TempDir(), quiet).WithSyncWrites(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestCompactorStops: Stop ends a compactor, and a second Stop returns
// too; a database running Badger's own compactors gets none.
func TestCompactorStops(t *testing.T) {
	db := openDB(t)
	if n := db.Opts().NumCompactors; n != 0 {
		t.Fatalf("Options runs %d compactors of Badger's own; want none", n)
	}
	c := StartCompactor(db, quiet)
	c.Stop()
	c.Stop()
	own, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	StartCompactor(own, quiet).Stop()
}

// TestKeyIterator: the keys under a prefix, in order and in reverse (from
// a seek past the prefix, as Badger's reverse iteration wants), nothing
// else.
func TestKeyIterator(t *testing.T) {
	db := openDB(t)
	err := db.Update(func(txn *badger.Txn) error {
		for _, k := range []string{"a/1", "b/1", "b/2", "b/3", "c/1"} {
			if err := txn.Set([]byte(k), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, reverse := range []bool{false, true} {
		var got []string
		err := db.View(func(txn *badger.Txn) error {
			it := KeyIterator(txn, []byte("b/"), reverse)
			defer it.Close()
			seek := []byte("b/")
			if reverse {
				seek = []byte("b/\xff")
			}
			for it.Seek(seek); it.Valid(); it.Next() {
				got = append(got, string(it.Item().Key()))
			}
			return nil
		})
		want := "b/1 b/2 b/3"
		if reverse {
			want = "b/3 b/2 b/1"
		}
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("reverse %v: %v, %v; want %s", reverse, got, err, want)
		}
	}
}

// TestLoggerLevels: Badger's errors and warnings keep their level, its
// info lines go to debug, each marked as Badger's.
func TestLoggerLevels(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Errorf("e %d\n", 1)
	l.Warningf("w")
	l.Infof("i")
	for _, want := range []string{`level=ERROR msg="badger: e 1"`, `level=WARN msg="badger: w"`, `level=DEBUG msg="badger: i"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}
}

// TestCompactorHold: a held compactor lets level 0 grow to two tables
// below the stall before it flattens, and returns to NumLevelZeroTables
// once every hold is released.
func TestCompactorHold(t *testing.T) {
	db := openDB(t)
	c := StartCompactor(db, quiet)
	defer c.Stop()
	o := db.Opts().WithNumLevelZeroTablesStall(16)
	if got := flattenAt(o, c.held.Load() > 0); got != o.NumLevelZeroTables {
		t.Fatalf("not held: flatten past %d tables, want %d", got, o.NumLevelZeroTables)
	}
	r1, r2 := c.Hold(), c.Hold()
	if got := flattenAt(o, c.held.Load() > 0); got != 14 {
		t.Fatalf("held: flatten past %d tables, want 14", got)
	}
	r1()
	r1()
	if c.held.Load() != 1 {
		t.Fatalf("%d holds after one of two released (twice)", c.held.Load())
	}
	r2()
	if got := flattenAt(o, c.held.Load() > 0); got != o.NumLevelZeroTables {
		t.Fatalf("released: flatten past %d tables, want %d", got, o.NumLevelZeroTables)
	}
	if got := flattenAt(o.WithNumLevelZeroTablesStall(3), true); got != o.NumLevelZeroTables {
		t.Fatalf("held with a stall of 3: flatten past %d tables, want %d", got, o.NumLevelZeroTables)
	}
}
