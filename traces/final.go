package traces

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
)

// MarkFinal makes task id final now, whatever its idle time and sessions:
// the agent said it is finished. From now on a step that started after
// this moment goes to a new task of its segmentation group (a step naming
// the task explicitly reopens it); a late step that started before reopens
// it, and the next pass makes it final again. It reports whether the task
// was final already. An unknown task is hindsight.ErrNotFound.
func (t *Store) MarkFinal(ctx context.Context, id string) (wasFinal bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.latest) // task records change here
	now := t.now()
	err = t.write(func(txn *badger.Txn) error {
		var rec taskRec
		if err := getJSON(txn, key(pTask, []byte(id)), &rec); err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("task %s: %w", id, hindsight.ErrNotFound)
			}
			return err
		}
		wasFinal = rec.Final
		rec.FinalAt = now
		if !rec.Final {
			rec.Final = true
			if err := txn.Delete(key(pOpen, []byte(id))); err != nil {
				return err
			}
			if err := txn.Set(key(pUnq, []byte(id)), nil); err != nil {
				return err
			}
		}
		return setJSON(txn, key(pTask, []byte(id)), &rec)
	})
	if err != nil {
		return false, fmt.Errorf("mark task final: %w", err)
	}
	return wasFinal, nil
}

// TaskOfSession returns the open task that holds the latest step of
// session id; hindsight.ErrNotFound when no open task has it.
func (t *Store) TaskOfSession(ctx context.Context, sessionID string) (string, error) {
	var best *taskRec
	err := t.db.View(func(txn *badger.Txn) error {
		ids, err := keysUnder(txn, pOpen)
		if err != nil {
			return err
		}
		for _, id := range ids {
			var rec taskRec
			if err := getJSON(txn, key(pTask, []byte(id)), &rec); err != nil {
				if errors.Is(err, badger.ErrKeyNotFound) {
					continue
				}
				return err
			}
			if _, ok := rec.Sessions[sessionID]; ok && (best == nil || rec.LastAt.After(best.LastAt)) {
				best = &rec
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("find task of session: %w", err)
	}
	if best == nil {
		return "", fmt.Errorf("no open task of session %s: %w", sessionID, hindsight.ErrNotFound)
	}
	return best.ID, nil
}

// HighWater returns the highest seq ingested from source, 0 when none.
func (t *Store) HighWater(ctx context.Context, source string) (uint64, error) {
	var seq uint64
	err := t.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key(pHW, []byte(source)))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { seq = bytesU64(v); return nil })
	})
	if err != nil {
		return 0, fmt.Errorf("read high-water mark: %w", err)
	}
	return seq, nil
}
