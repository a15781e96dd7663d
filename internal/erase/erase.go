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
	"os"
	"strconv"
	"strings"

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

// fillerPrefix keys the entries RotateValueLog writes; no other key of
// Hindsight's databases begins with a NUL byte.
var fillerPrefix = []byte("\x00erase-filler/")

// fillerBatch is how many filler entries are written between two looks
// at the value log's files.
const fillerBatch = 256

// RotateValueLog makes Badger leave the value-log file it appends to, so
// that the garbage collector may rewrite it: Badger never rewrites that
// file, so a value erased from it would stay on disk until it is full.
// It writes filler entries (each just large enough for the value log)
// until Badger opens a new file, which it does past ValueLogMaxEntries
// entries or ValueLogFileSize bytes, whichever comes first; then it erases
// the filler and collects the value log, which rewrites what was still
// live in the old file and deletes it. A database with a small
// ValueLogMaxEntries costs little filler (entries of ValueThreshold bytes
// each). It does nothing to a database without a value log.
func RotateValueLog(db *badger.DB) error {
	opt := db.Opts()
	if opt.InMemory {
		return nil
	}
	first, err := lastValueLog(opt.ValueDir)
	if err != nil || first < 0 {
		return err
	}
	value := make([]byte, max(opt.ValueThreshold, 1))
	limit := opt.ValueLogFileSize + int64(fillerBatch)*int64(len(value))
	var n, written int64
	for {
		wb := db.NewWriteBatch()
		for range fillerBatch {
			if err := wb.Set(fmt.Appendf(append([]byte(nil), fillerPrefix...), "%016x", n), value); err != nil {
				wb.Cancel()
				return fmt.Errorf("rotate value log: %w", err)
			}
			n++
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("rotate value log: %w", err)
		}
		written += int64(fillerBatch) * int64(len(value))
		cur, err := lastValueLog(opt.ValueDir)
		if err != nil {
			return err
		}
		if cur > first {
			break
		}
		if written > limit {
			return fmt.Errorf("rotate value log: no new file after %d bytes", written)
		}
	}
	if err := db.DropPrefix(fillerPrefix); err != nil {
		return fmt.Errorf("rotate value log: drop filler: %w", err)
	}
	return CollectValueLog(db)
}

// lastValueLog returns the highest number of the value-log files in dir,
// or -1 when there is none.
func lastValueLog(dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("rotate value log: %w", err)
	}
	last := int64(-1)
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".vlog")
		if !ok {
			continue
		}
		if fid, err := strconv.ParseInt(name, 10, 64); err == nil && fid > last {
			last = fid
		}
	}
	return last, nil
}
