package erase_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/erase"
)

const secret = "s3cr3t-Zr8Qw"

func open(t *testing.T, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithValueThreshold(1 << 10).WithSyncWrites(true).
		WithMemTableSize(1 << 20).WithBlockCacheSize(1 << 20).WithNumLevelZeroTables(2).WithValueLogFileSize(1 << 20))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// holding lists the files of dir that contain secret.
func holding(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && bytes.Contains(b, []byte(secret)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestKeys: the exact keys and the prefixes go, in every version, from
// every file but the value-log file being appended to, and from that one
// once the database is reopened and its value log collected; keys that
// merely extend an exact key stay, with their values.
func TestKeys(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir)
	big := strings.Repeat("x", 4<<10) + secret // above the value threshold
	kv := map[string]string{
		"exp/a":         "v1 " + secret,
		"exp/ab":        "neighbour",
		"step/t1\x00":   "one " + secret,
		"step/t1\x001":  big,
		"step/t10\x001": "other task",
		"keep/z":        "kept",
	}
	for round := range 2 { // two versions of each key
		err := db.Update(func(txn *badger.Txn) error {
			for k, v := range kv {
				if err := txn.Set([]byte(k), []byte(v+strings.Repeat(" ", round))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(holding(t, dir)) == 0 {
		t.Fatal("the secret is on no file before erasing: the test proves nothing")
	}
	if err := erase.Keys(db, [][]byte{[]byte("exp/a")}, [][]byte{[]byte("step/t1\x00")}); err != nil {
		t.Fatal(err)
	}
	for _, f := range holding(t, dir) {
		if !strings.HasSuffix(f, ".vlog") {
			t.Errorf("%s still holds the secret", f)
		}
	}
	check := func(db *badger.DB) {
		t.Helper()
		got := map[string]string{}
		db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.DefaultIteratorOptions)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				v, _ := it.Item().ValueCopy(nil)
				got[string(it.Item().Key())] = strings.TrimSpace(string(v))
			}
			return nil
		})
		want := map[string]string{"exp/ab": "neighbour", "step/t10\x001": "other task", "keep/z": "kept"}
		if len(got) != len(want) {
			t.Errorf("keys left: %q, want %q", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%q = %q, want %q", k, got[k], v)
			}
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, dir)
	defer db.Close()
	if err := erase.CollectValueLog(db); err != nil {
		t.Fatal(err)
	}
	if hits := holding(t, dir); len(hits) > 0 {
		t.Errorf("after a reopen and a collection the secret is still in %v", hits)
	}
	check(db)
}

// TestRotateValueLog: a value erased from the value-log file Badger
// appends to is in no file once RotateValueLog returns, with the database
// open; live values of that file are still read, and the filler is gone.
func TestRotateValueLog(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithValueThreshold(1 << 10).
		WithMemTableSize(1 << 20).WithBlockCacheSize(1 << 20).WithValueLogFileSize(16 << 20).WithValueLogMaxEntries(500))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	live := strings.Repeat("live ", 400)
	err = db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte("step/gone"), []byte(strings.Repeat("y", 2<<10)+secret)); err != nil {
			return err
		}
		return txn.Set([]byte("step/kept"), []byte(live))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := erase.Keys(db, nil, [][]byte{[]byte("step/gone")}); err != nil {
		t.Fatal(err)
	}
	if len(holding(t, dir)) == 0 {
		t.Fatal("the erased value left the active value-log file without a rotation: the test shows nothing")
	}
	if err := erase.RotateValueLog(db); err != nil {
		t.Fatal(err)
	}
	if files := holding(t, dir); len(files) > 0 {
		t.Errorf("the erased value is still in %v", files)
	}
	err = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("step/kept"))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if string(v) != live {
			t.Errorf("the live value reads %.20q…", v)
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("\x00")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			t.Errorf("filler left: %q", it.Item().Key())
			break
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
