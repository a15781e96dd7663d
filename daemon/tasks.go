package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"
)

// CloseSession records that a sidecar's session ended. When source is set,
// lastSeq is the seq of the last step the sidecar recorded for it; the close
// then takes effect once that step has arrived, so a task is never final
// while its steps still sit in an outbox. It returns the tasks that became
// final.
func (t *TraceStore) CloseSession(ctx context.Context, sessionID, source string, lastSeq *uint64) ([]string, error) {
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
func (t *TraceStore) FinalizeIdle(ctx context.Context) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.finalize(ctx, t.now())
}

// finalize does FinalizeIdle; t.mu is held.
func (t *TraceStore) finalize(ctx context.Context, now time.Time) ([]string, error) {
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

func (t *TraceStore) isFinal(rec *taskRec, now time.Time) bool {
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
func (t *TraceStore) Unqueued(ctx context.Context) ([]string, error) {
	var ids []string
	err := t.db.View(func(txn *badger.Txn) error {
		var err error
		ids, err = keysUnder(txn, pUnq)
		return err
	})
	return ids, err
}

// MarkQueued records that the final task id was handed to reflection.
func (t *TraceStore) MarkQueued(ctx context.Context, id string) error {
	return t.update(id, func(txn *badger.Txn, rec *taskRec) error {
		if rec.Reflection == "" {
			rec.Reflection = "pending"
		}
		return txn.Delete(key(pUnq, []byte(id)))
	})
}

// SetReflection records the reflection state of a task: "pending", "done"
// or "failed". The reflection queue calls it.
func (t *TraceStore) SetReflection(ctx context.Context, id, state string) error {
	return t.update(id, func(txn *badger.Txn, rec *taskRec) error {
		rec.Reflection = state
		return nil
	})
}

func (t *TraceStore) update(id string, fn func(*badger.Txn, *taskRec) error) error {
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

// TaskFilter selects tasks to list.
type TaskFilter struct {
	Final *bool // only final (true) or open (false) tasks
	Limit int   // 0: all
}

// Tasks lists tasks, newest first, without their steps.
func (t *TraceStore) Tasks(ctx context.Context, f TaskFilter) ([]hindsight.Task, error) {
	var out []hindsight.Task
	err := t.db.View(func(txn *badger.Txn) error {
		return eachTask(txn, func(rec *taskRec) {
			if f.Final == nil || rec.Final == *f.Final {
				out = append(out, publicTask(rec))
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.After(out[j].StartedAt)
		}
		return out[i].ID > out[j].ID
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// eachTask calls fn with every task record, in key order.
func eachTask(txn *badger.Txn, fn func(rec *taskRec)) error {
	opt := badger.DefaultIteratorOptions
	opt.Prefix = pTask
	it := txn.NewIterator(opt)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		var rec taskRec
		if err := it.Item().Value(func(b []byte) error { return json.Unmarshal(b, &rec) }); err != nil {
			return err
		}
		fn(&rec)
	}
	return nil
}

func publicTask(rec *taskRec) hindsight.Task {
	task := rec.Task
	if task.Servers == nil {
		task.Servers = []string{}
	}
	return task
}

// Task returns a task with its steps in step order. A missing task is
// hindsight.ErrNotFound.
func (t *TraceStore) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	defer t.trim.touched() // what it read stays mapped until trimmed
	var task hindsight.Task
	err := t.db.View(func(txn *badger.Txn) error {
		var rec taskRec
		if err := getJSON(txn, key(pTask, []byte(id)), &rec); err != nil {
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("task %s: %w", id, hindsight.ErrNotFound)
			}
			return err
		}
		task = publicTask(&rec)
		task.Steps = make([]hindsight.Step, 0, rec.StepCount)
		return stepsOf(txn, id, func(s *hindsight.Step) error {
			task.Steps = append(task.Steps, *s)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read task: %w", err)
	}
	return &task, nil
}

// TaskInfo returns a task without its steps (Steps is nil), reading only
// its record. A missing task is hindsight.ErrNotFound.
func (t *TraceStore) TaskInfo(ctx context.Context, id string) (*hindsight.Task, error) {
	var task hindsight.Task
	err := t.db.View(func(txn *badger.Txn) error {
		rec, err := taskRecord(txn, id)
		if err == nil {
			task = publicTask(rec)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read task: %w", err)
	}
	return &task, nil
}

// StreamTask calls head with a task without its steps, then step with
// each of its steps in step order, from one snapshot of the store: what
// Task returns, without holding the steps in memory. A missing task is
// hindsight.ErrNotFound, before head is called.
func (t *TraceStore) StreamTask(ctx context.Context, id string, head func(*hindsight.Task) error, step func(*hindsight.Step) error) error {
	defer t.trim.touched() // what it read stays mapped until trimmed
	return t.db.View(func(txn *badger.Txn) error {
		rec, err := taskRecord(txn, id)
		if err != nil {
			return fmt.Errorf("read task: %w", err)
		}
		task := publicTask(rec)
		if err := head(&task); err != nil {
			return err
		}
		return stepsOf(txn, id, t.pagingOut(func(s *hindsight.Step) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return step(s)
		}))
	})
}

// taskRecord reads the record of task id; a missing one is
// hindsight.ErrNotFound.
func taskRecord(txn *badger.Txn, id string) (*taskRec, error) {
	var rec taskRec
	if err := getJSON(txn, key(pTask, []byte(id)), &rec); err != nil {
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil, fmt.Errorf("task %s: %w", id, hindsight.ErrNotFound)
		}
		return nil, err
	}
	return &rec, nil
}

// Steps calls fn for every step of the tasks ids (all tasks when ids is
// empty), tasks oldest first, steps in step order.
func (t *TraceStore) Steps(ctx context.Context, ids []string, fn func(*hindsight.Step) error) error {
	defer t.trim.touched() // what it read stays mapped until trimmed
	if len(ids) == 0 {
		tasks, err := t.Tasks(ctx, TaskFilter{})
		if err != nil {
			return err
		}
		for i := len(tasks) - 1; i >= 0; i-- {
			ids = append(ids, tasks[i].ID)
		}
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := t.db.View(func(txn *badger.Txn) error {
			if _, err := txn.Get(key(pTask, []byte(id))); err != nil {
				if errors.Is(err, badger.ErrKeyNotFound) {
					return fmt.Errorf("task %s: %w", id, hindsight.ErrNotFound)
				}
				return err
			}
			return stepsOf(txn, id, t.pagingOut(fn))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// pageOutEvery is how many steps a long read passes between page-outs of
// the store's mapped files; else what it read stays resident until the
// trimmer runs after it (a task of 100k steps: 200 MB).
const pageOutEvery = 10000

// pagingOut returns fn, paging the store's mapped files out every
// pageOutEvery steps it is called with.
func (t *TraceStore) pagingOut(fn func(*hindsight.Step) error) func(*hindsight.Step) error {
	n := 0
	return func(s *hindsight.Step) error {
		if n++; n%pageOutEvery == 0 {
			t.trim.pageOut()
		}
		return fn(s)
	}
}

func stepsOf(txn *badger.Txn, id string, fn func(*hindsight.Step) error) error {
	opt := badger.DefaultIteratorOptions
	opt.Prefix = key(pStep, []byte(id), nil)
	it := txn.NewIterator(opt)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		var steps []hindsight.Step // fn may keep a pointer
		err := item.Value(func(b []byte) error {
			return eachStored(b, func(raw []byte) error {
				steps = append(steps, hindsight.Step{})
				return wire.DecodeStep(raw, &steps[len(steps)-1])
			})
		})
		if err != nil {
			return err
		}
		// Steps are stored as they were delivered; the key says their
		// task and the index of the first.
		k := item.Key()
		first := int(binary.BigEndian.Uint32(k[len(k)-4:]))
		for i := range steps {
			steps[i].TaskID, steps[i].StepIndex = id, first+i
			if err := fn(&steps[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// eachStored calls fn with each step's JSON in a stored value: one step,
// or a chunk of them, comma-separated.
func eachStored(b []byte, fn func(raw []byte) error) error {
	err := wire.EachValue(b, fn)
	if errors.Is(err, wire.ErrBadValue) {
		return fmt.Errorf("read stored steps: %w", err)
	}
	return err
}

// TraceStats summarizes the trace store.
type TraceStats struct {
	Tasks      int   `json:"tasks"`
	OpenTasks  int   `json:"open_tasks"`
	FinalTasks int   `json:"final_tasks"`
	Steps      int   `json:"steps"`
	Unqueued   int   `json:"unqueued"` // final tasks waiting to be handed to reflection
	DiskBytes  int64 `json:"disk_bytes"`
}

// Stats counts tasks and steps.
func (t *TraceStore) Stats(ctx context.Context) (TraceStats, error) {
	var st TraceStats
	err := t.db.View(func(txn *badger.Txn) error {
		err := eachTask(txn, func(rec *taskRec) {
			st.Tasks++
			st.Steps += rec.StepCount
			if rec.Final {
				st.FinalTasks++
			} else {
				st.OpenTasks++
			}
		})
		if err != nil {
			return err
		}
		unq, err := keysUnder(txn, pUnq)
		st.Unqueued = len(unq)
		return err
	})
	st.DiskBytes = DirSize(t.dir)
	return st, err
}

// keysUnder returns the rest of every key under prefix.
func keysUnder(txn *badger.Txn, prefix []byte) ([]string, error) {
	it := keyIterator(txn, prefix, false)
	defer it.Close()
	var out []string
	for it.Rewind(); it.Valid(); it.Next() {
		out = append(out, string(bytes.TrimPrefix(it.Item().Key(), prefix)))
	}
	return out, nil
}

func bytesU64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
