package traces

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
)

// queueKeyPrefix is what the reflection queue's keys (reflectq/…) and its
// error templates (reflect-templates/…) start with; they share the trace
// store's database.
var queueKeyPrefix = []byte("reflect")

// QueueDB returns the database the reflection queue keeps its keys in: the
// store's own, under queueKeyPrefix. A queue kept in a Badger database of
// its own at oldDir (the layout before) is moved into it first (see
// migrateQueueDB); moved is how many keys were. Call it before the queue
// starts.
func (t *Store) QueueDB(oldDir string) (db *badger.DB, moved int, err error) {
	moved, err = migrateQueueDB(t, oldDir, t.logger)
	if err != nil {
		return nil, moved, err
	}
	return t.db, moved, nil
}

// migrateQueueDB moves a reflection queue kept in a Badger database of its
// own (oldDir, the layout before the queue shared the trace store's) into
// the trace store, and removes oldDir. It returns how many keys it copied.
//
// It is safe to interrupt: the keys are copied and synced before oldDir is
// renamed aside (oldDir+".old") and then removed, so a crash before the
// rename copies the same keys again at the next start (nothing else writes
// them before the migration ends), and one after it only removes what is
// left. Call it before the queue starts. Keys outside the queue's prefix
// are not copied.
func migrateQueueDB(t *Store, oldDir string, logger *slog.Logger) (int, error) {
	aside := oldDir + ".old"
	if err := os.RemoveAll(aside); err != nil {
		return 0, fmt.Errorf("remove migrated queue: %w", err)
	}
	if _, err := os.Stat(oldDir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("migrate queue: %w", err)
	}
	n, err := copyQueueKeys(t, oldDir, logger)
	if err != nil {
		return n, err
	}
	if err := t.db.Sync(); err != nil {
		return n, fmt.Errorf("sync migrated queue: %w", err)
	}
	if err := os.Rename(oldDir, aside); err != nil {
		return n, fmt.Errorf("set migrated queue aside: %w", err)
	}
	if err := os.RemoveAll(aside); err != nil {
		return n, fmt.Errorf("remove migrated queue: %w", err)
	}
	return n, nil
}

// copyQueueKeys copies the queue's keys from the Badger database in oldDir
// into the trace store, overwriting what a copy before it wrote.
func copyQueueKeys(t *Store, oldDir string, logger *slog.Logger) (int, error) {
	old, err := badger.Open(badgerdb.Options(oldDir, logger))
	if err != nil {
		return 0, fmt.Errorf("open old queue: %w", err)
	}
	defer old.Close()
	wb := t.db.NewWriteBatch()
	defer wb.Cancel()
	n, skipped := 0, 0
	err = old.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			if !bytes.HasPrefix(item.Key(), queueKeyPrefix) {
				skipped++
				continue
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := wb.Set(item.KeyCopy(nil), v); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err != nil {
		return 0, fmt.Errorf("copy queue keys: %w", err)
	}
	if skipped > 0 {
		logger.Warn("migrate reflection queue: keys outside the queue's prefix left behind", "skipped", skipped)
	}
	return n, nil
}
