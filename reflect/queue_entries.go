package reflect

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// keyPrefix namespaces the queue's keys in a Badger database it may share
// with the daemon's trace store.
const keyPrefix = "reflectq/"

func stateKey(state, id string) []byte { return []byte(keyPrefix + state + "/" + id) }

// queueDB is where the queue's entries live: one Badger database, the
// queue's own or shared with the daemon's trace store.
type queueDB struct {
	db  *badger.DB
	own bool // the queue opened db, and Close closes it
	// mu serializes the queue's read-modify-write transactions: in a
	// database without conflict detection (the daemon's trace store)
	// Badger would not catch two of them crossing.
	mu sync.Mutex
}

// get returns the entry of id in any state, or nil.
func (q *Queue) get(txn *badger.Txn, id string) (*Entry, error) {
	for _, st := range []string{StatePending, StateDone, StateFailed} {
		item, err := txn.Get(stateKey(st, id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var e Entry
		if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &e) }); err != nil {
			return nil, fmt.Errorf("decode queue entry %s: %w", id, err)
		}
		e.State = st
		return &e, nil
	}
	return nil, nil
}

// put writes e under its state, removing it from oldState.
func (q *Queue) put(txn *badger.Txn, oldState string, e *Entry) error {
	if oldState != "" && oldState != e.State {
		if err := txn.Delete(stateKey(oldState, e.TaskID)); err != nil {
			return err
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return txn.Set(stateKey(e.State, e.TaskID), b)
}

// update runs fn in a read-write transaction, one at a time, retrying on
// conflicts.
func (q *Queue) update(fn func(txn *badger.Txn) error) error {
	q.entries.mu.Lock()
	defer q.entries.mu.Unlock()
	var err error
	for range 5 {
		if err = q.entries.db.Update(fn); !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if err == nil && q.Written != nil {
		q.Written()
	}
	return err
}
