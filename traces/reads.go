package traces

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/wire"
)

// TaskFilter selects tasks to list.
type TaskFilter struct {
	Final *bool // only final (true) or open (false) tasks
	Limit int   // 0: all
}

// Tasks lists tasks, newest first, without their steps.
func (t *Store) Tasks(ctx context.Context, f TaskFilter) ([]hindsight.Task, error) {
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
func (t *Store) Task(ctx context.Context, id string) (*hindsight.Task, error) {
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
func (t *Store) TaskInfo(ctx context.Context, id string) (*hindsight.Task, error) {
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
func (t *Store) StreamTask(ctx context.Context, id string, head func(*hindsight.Task) error, step func(*hindsight.Step) error) error {
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
func (t *Store) Steps(ctx context.Context, ids []string, fn func(*hindsight.Step) error) error {
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
func (t *Store) pagingOut(fn func(*hindsight.Step) error) func(*hindsight.Step) error {
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

// Stats summarizes the trace store.
type Stats struct {
	Tasks      int   `json:"tasks"`
	OpenTasks  int   `json:"open_tasks"`
	FinalTasks int   `json:"final_tasks"`
	Steps      int   `json:"steps"`
	Unqueued   int   `json:"unqueued"` // final tasks waiting to be handed to reflection
	DiskBytes  int64 `json:"disk_bytes"`
}

// Stats counts tasks and steps.
func (t *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
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
	st.DiskBytes = diskspace.DirSize(t.dir)
	return st, err
}

// DataBytes is the size of the data the trace store holds: its keys and
// values as Badger estimates them, read without fetching values. The
// directory is larger (preallocated logs, tables not compacted yet).
func (t *Store) DataBytes(ctx context.Context) (int64, error) {
	var n int64
	err := t.db.View(func(txn *badger.Txn) error {
		it := badgerdb.KeyIterator(txn, nil, false)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n += it.Item().EstimatedSize()
		}
		return ctx.Err()
	})
	if err != nil {
		return 0, fmt.Errorf("measure trace store: %w", err)
	}
	return n, nil
}

// keysUnder returns the rest of every key under prefix.
func keysUnder(txn *badger.Txn, prefix []byte) ([]string, error) {
	it := badgerdb.KeyIterator(txn, prefix, false)
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
