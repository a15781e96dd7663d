// Package erase removes keys from a Badger database for good: every
// version of them, from the memtables and their write-ahead logs, from
// every table, and, as far as Badger allows, from the value log. A soft
// delete or a plain Badger delete leaves the old bytes on disk until some
// later compaction; erase is for data that must go now (a secret that
// escaped redaction).
package erase

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Keys erases the keys exact (only those keys) and every key under the
// prefixes. The caller must keep other writers away from the keys that
// share an exact key's prefix (Badger drops by prefix: they are read first
// and written back).
//
// It works through DB.DropPrefix, which stops writes, flushes the
// memtables without the dropped keys (their write-ahead logs are then
// deleted) and rewrites the tables that hold them; then the value log is
// garbage-collected until nothing is left to rewrite. Values stored in
// the value log (above the database's value threshold) in its newest file
// stay there until that file is full and collected later: Badger never
// rewrites the file it appends to.
func Keys(db *badger.DB, exact, prefixes [][]byte) error {
	var keep []*badger.Entry
	err := db.View(func(txn *badger.Txn) error {
		for _, k := range exact {
			opt := badger.DefaultIteratorOptions
			opt.Prefix = k
			it := txn.NewIterator(opt)
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				if bytes.Equal(item.Key(), k) {
					continue
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					it.Close()
					return err
				}
				e := badger.NewEntry(item.KeyCopy(nil), v).WithMeta(item.UserMeta())
				if exp := item.ExpiresAt(); exp > 0 {
					e.ExpiresAt = exp
				}
				keep = append(keep, e)
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read neighbours: %w", err)
	}
	all := append(append([][]byte(nil), exact...), prefixes...)
	if len(all) == 0 {
		return nil
	}
	if err := db.DropPrefix(all...); err != nil {
		return fmt.Errorf("drop prefixes: %w", err)
	}
	if len(keep) > 0 {
		wb := db.NewWriteBatch()
		for _, e := range keep {
			if err := wb.SetEntry(e); err != nil {
				wb.Cancel()
				return fmt.Errorf("restore neighbours: %w", err)
			}
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("restore neighbours: %w", err)
		}
	}
	return CollectValueLog(db)
}

// CollectValueLog runs the value-log garbage collector until it finds
// nothing worth rewriting.
func CollectValueLog(db *badger.DB) error {
	for range 100 {
		err := db.RunValueLogGC(0.01)
		switch {
		case err == nil:
			continue
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected), errors.Is(err, badger.ErrGCInMemoryMode):
			return nil
		default:
			return fmt.Errorf("collect value log: %w", err)
		}
	}
	return nil
}
