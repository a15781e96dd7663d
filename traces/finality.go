package traces

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
)

// CloseSession records that a sidecar's session ended. When source is set,
// lastSeq is the seq of the last step the sidecar recorded for it; the close
// then takes effect once that step has arrived, so a task is never final
// while its steps still sit in an outbox. It returns the tasks that became
// final.
func (t *Store) CloseSession(ctx context.Context, sessionID, source string, lastSeq *uint64) ([]string, error) {
	if sessionID == "" {
		return nil, errors.New("close session: no session id")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	c := closeRec{At: now}
	err := t.write(func(txn *badger.Txn) error {
		if source != "" && lastSeq != nil {
			c.Source, c.LastSeq = source, *lastSeq
			c.Pending = true
			item, err := txn.Get(key(pHW, []byte(source)))
			if err == nil {
				err = item.Value(func(v []byte) error {
					if len(v) == 8 && bytesU64(v) >= *lastSeq {
						c.Pending = false
					}
					return nil
				})
			}
			if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
		}
		return setJSON(txn, key(pClosed, []byte(sessionID)), &c)
	})
	if err != nil {
		delete(t.closes, sessionID) // written or not: the store says
		return nil, fmt.Errorf("close session: %w", err)
	}
	t.cacheClose(sessionID, closeState{rec: c, found: true})
	return t.finalize(ctx, now)
}

// FinalizeIdle marks final every open task that has all its sessions closed
// or has been idle past the gap, and returns their ids. A task's idle time
// counts from its last step, its last arrival and the store's start,
// whichever is latest: a daemon that was down gives the sidecars a full gap
// to deliver what they buffered.
func (t *Store) FinalizeIdle(ctx context.Context) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finalize(ctx, t.now())
}

// finalize does FinalizeIdle; t.mu is held.
func (t *Store) finalize(ctx context.Context, now time.Time) ([]string, error) {
	clear(t.latest) // task records change here
	var final []string
	wrote := false // a pass that changes nothing leaves the sync loop asleep
	err := t.db.Update(func(txn *badger.Txn) error {
		ids, err := keysUnder(txn, pOpen)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			var rec taskRec
			if err := getJSON(txn, key(pTask, []byte(id)), &rec); err != nil {
				if errors.Is(err, badger.ErrKeyNotFound) {
					_ = txn.Delete(key(pOpen, []byte(id)))
					wrote = true
					continue
				}
				return err
			}
			changed := false
			for sid, closed := range rec.Sessions {
				if !closed {
					var c closeRec
					if getJSON(txn, key(pClosed, []byte(sid)), &c) == nil && !c.Pending {
						rec.Sessions[sid], changed = true, true
					}
				}
			}
			if !t.isFinal(&rec, now) {
				if changed {
					wrote = true
					if err := setJSON(txn, key(pTask, []byte(id)), &rec); err != nil {
						return err
					}
				}
				continue
			}
			rec.Final, wrote = true, true
			if err := setJSON(txn, key(pTask, []byte(id)), &rec); err != nil {
				return err
			}
			if err := txn.Delete(key(pOpen, []byte(id))); err != nil {
				return err
			}
			if err := txn.Set(key(pUnq, []byte(id)), nil); err != nil {
				return err
			}
			final = append(final, id)
		}
		return nil
	})
	if wrote || err != nil {
		t.dirty.Store(true)
	}
	if err != nil {
		return nil, fmt.Errorf("finalize tasks: %w", err)
	}
	return final, nil
}

func (t *Store) isFinal(rec *taskRec, now time.Time) bool {
	if !rec.FinalAt.IsZero() {
		return true // the agent said so; a late step reopened it
	}
	if len(rec.Sessions) > 0 {
		all := true
		for _, closed := range rec.Sessions {
			all = all && closed
		}
		if all {
			return true
		}
	}
	last := rec.LastAt
	for _, at := range []time.Time{rec.IngestedAt, t.started} {
		if at.After(last) {
			last = at
		}
	}
	return now.Sub(last) > t.gap
}

// Unqueued returns final tasks not yet handed to reflection.
func (t *Store) Unqueued(ctx context.Context) ([]string, error) {
	var ids []string
	err := t.db.View(func(txn *badger.Txn) error {
		var err error
		ids, err = keysUnder(txn, pUnq)
		return err
	})
	return ids, err
}

// MarkQueued records that the final task id was handed to reflection.
func (t *Store) MarkQueued(ctx context.Context, id string) error {
	return t.update(id, func(txn *badger.Txn, rec *taskRec) error {
		if rec.Reflection == "" {
			rec.Reflection = "pending"
		}
		return txn.Delete(key(pUnq, []byte(id)))
	})
}

// SetReflection records the reflection state of a task: "pending", "done"
// or "failed". The reflection queue calls it.
func (t *Store) SetReflection(ctx context.Context, id, state string) error {
	return t.update(id, func(txn *badger.Txn, rec *taskRec) error {
		rec.Reflection = state
		return nil
	})
}

func (t *Store) update(id string, fn func(*badger.Txn, *taskRec) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.latest) // task records change here
	return t.write(func(txn *badger.Txn) error {
		var rec taskRec
		if err := getJSON(txn, key(pTask, []byte(id)), &rec); err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("task %s: %w", id, hindsight.ErrNotFound)
			}
			return err
		}
		if err := fn(txn, &rec); err != nil {
			return err
		}
		return setJSON(txn, key(pTask, []byte(id)), &rec)
	})
}
