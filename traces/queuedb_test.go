package traces

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
)

// oldQueueDB makes a reflection queue database of the previous layout in
// dir: n entries, error templates, and a key outside the queue's prefix.
func oldQueueDB(t *testing.T, dir string, n int) {
	t.Helper()
	db, err := badger.Open(badgerdb.Options(dir, quiet))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		for i := range n {
			if err := txn.Set(fmt.Appendf(nil, "reflectq/pending/task-%d", i), fmt.Appendf(nil, `{"task_id":"task-%d"}`, i)); err != nil {
				return err
			}
		}
		if err := txn.Set([]byte("reflect-templates/miner"), []byte(`{"clusters":[]}`)); err != nil {
			return err
		}
		return txn.Set([]byte("stray"), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// queueKeys returns the trace store's keys under the queue's prefix.
func queueKeys(t *testing.T, ts *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := ts.DB().View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: queueKeyPrefix, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[string(it.Item().Key())] = string(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestQueueDBMigrates: the old queue database's keys land in the trace
// store, the stray key does not, and the old directory is gone; a second
// run finds nothing to do.
func TestQueueDBMigrates(t *testing.T) {
	root := t.TempDir()
	oldDir := filepath.Join(root, "reflect")
	oldQueueDB(t, oldDir, 300)
	ts, err := Open(filepath.Join(root, "traces"), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	n, err := migrateQueueDB(ts, oldDir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if n != 301 {
		t.Errorf("copied %d keys, want 301 (300 entries and the templates)", n)
	}
	got := queueKeys(t, ts)
	if len(got) != 301 || got["reflectq/pending/task-7"] != `{"task_id":"task-7"}` || got["reflect-templates/miner"] != `{"clusters":[]}` {
		t.Errorf("trace store holds %d queue keys; task-7: %q, templates: %q", len(got), got["reflectq/pending/task-7"], got["reflect-templates/miner"])
	}
	if err := ts.DB().View(func(txn *badger.Txn) error { _, err := txn.Get([]byte("stray")); return err }); err != badger.ErrKeyNotFound {
		t.Errorf("the key outside the queue's prefix was copied (%v)", err)
	}
	for _, dir := range []string{oldDir, oldDir + ".old"} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", dir, err)
		}
	}
	if n, err := migrateQueueDB(ts, oldDir, quiet); n != 0 || err != nil {
		t.Errorf("second migration: %d keys, %v; want nothing to do", n, err)
	}
}

// TestQueueDBMigratesInterrupted: a migration interrupted after the copy
// (before the old directory was set aside) or after setting it aside (in
// the middle of removing it) finishes at the next start with the same
// keys.
func TestQueueDBMigratesInterrupted(t *testing.T) {
	root := t.TempDir()
	oldDir := filepath.Join(root, "reflect")
	oldQueueDB(t, oldDir, 10)
	ts, err := Open(filepath.Join(root, "traces"), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	// Interrupted after the copy: the keys are in both.
	if _, err := copyQueueKeys(ts, oldDir, quiet); err != nil {
		t.Fatal(err)
	}
	if n, err := migrateQueueDB(ts, oldDir, quiet); n != 11 || err != nil {
		t.Fatalf("migration after an interrupted one: %d keys, %v; want 11", n, err)
	}
	if got := queueKeys(t, ts); len(got) != 11 {
		t.Errorf("%d queue keys after the repeated copy, want 11", len(got))
	}
	// Interrupted while removing the directory set aside.
	aside := oldDir + ".old"
	if err := os.MkdirAll(aside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(aside, "000001.vlog"), []byte("half removed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := migrateQueueDB(ts, oldDir, quiet); n != 0 || err != nil {
		t.Errorf("migration with a half-removed old directory: %d keys, %v", n, err)
	}
	if _, err := os.Stat(aside); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", aside, err)
	}
	if got := queueKeys(t, ts); len(got) != 11 {
		t.Errorf("%d queue keys at the end, want 11", len(got))
	}
}
