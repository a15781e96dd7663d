package traces

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/erase"
)

// Purge is the answer to a secret that escaped redaction: it removes data
// for good, not by soft delete, and compacts Badger so that the bytes
// leave the disk (see package erase).

// PurgeTasks removes the tasks ids and everything stored for them: their
// records, steps, group index entries and finality markers, every version
// of them erased from the files. Unknown ids are ignored; it returns the
// ids removed; when it returns, their bytes are in no file of the store
// (see erase.RotateValueLog). (The dedupe records of the steps' sources stay: they hold
// sequence numbers, not content.)
func (t *Store) PurgeTasks(ctx context.Context, ids []string) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.latest)
	var exact, prefixes [][]byte
	var removed []string
	err := t.db.View(func(txn *badger.Txn) error {
		for _, id := range ids {
			if !ValidID(id) {
				continue
			}
			var rec taskRec
			if err := getJSON(txn, key(pTask, []byte(id)), &rec); errors.Is(err, badger.ErrKeyNotFound) {
				continue
			} else if err != nil {
				return err
			}
			removed = append(removed, id)
			exact = append(exact, key(pTask, []byte(id)), key(pOpen, []byte(id)), key(pUnq, []byte(id)))
			prefixes = append(prefixes, key(pStep, []byte(id), nil))
			// The group index: every entry of the task's group naming it.
			gp := key(pGroup, []byte(rec.Group), nil)
			opt := badger.DefaultIteratorOptions
			opt.Prefix = gp
			it := txn.NewIterator(opt)
			for it.Rewind(); it.Valid(); it.Next() {
				var hit bool
				if err := it.Item().Value(func(v []byte) error { hit = bytes.Equal(v, []byte(id)); return nil }); err != nil {
					it.Close()
					return err
				}
				if hit {
					exact = append(exact, it.Item().KeyCopy(nil))
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	if len(removed) == 0 {
		return nil, nil
	}
	if err := erase.Keys(t.db, exact, prefixes); err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	// Steps from 1 KiB are in the value log, maybe in the file Badger
	// appends to: it is left, and collected.
	if err := erase.RotateValueLog(t.db); err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	t.dirty.Store(true)
	return removed, ctx.Err()
}

// TasksBefore returns the ids of the tasks whose last step is before
// cutoff, final or not.
func (t *Store) TasksBefore(ctx context.Context, cutoff time.Time) ([]string, error) {
	var ids []string
	err := t.db.View(func(txn *badger.Txn) error {
		return eachTask(txn, func(rec *taskRec) {
			last := rec.LastAt
			if last.IsZero() {
				last = rec.EndedAt
			}
			if last.Before(cutoff) {
				ids = append(ids, rec.ID)
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks before %s: %w", cutoff.Format(time.RFC3339), err)
	}
	return ids, ctx.Err()
}
