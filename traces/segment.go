package traces

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/wire"
)

// stepTimes returns when a step started and ended, falling back on now for
// a step that carries no time.
func stepTimes(s *wire.Meta, now time.Time) (start, end time.Time) {
	start, end = s.StartedAt, s.EndedAt
	if start.IsZero() {
		start = end
	}
	if start.IsZero() {
		start = now
	}
	if end.Before(start) {
		end = start
	}
	return start, end
}

// groupInputs are what a step's segmentation group is derived from.
type groupInputs struct {
	explicitTask, transport, sessionID, source string
	hostPID                                    int
}

// groupOf names the segmentation group of a step: the explicit task, the
// agent host process of a stdio sidecar, the HTTP session, or, lacking
// all, the sidecar that sent it.
func groupOf(s *wire.Meta) (group string, explicit bool) {
	switch {
	case s.ExplicitTask != "" && ValidID(s.ExplicitTask):
		return "explicit:" + s.ExplicitTask, true
	case s.HostPID > 0 && (s.Transport == "" || s.Transport == "stdio"):
		return "host:" + strconv.Itoa(s.HostPID), false
	case s.SessionID != "":
		return "session:" + s.SessionID, false
	}
	return "source:" + s.Source, false
}

// segment finds or creates the task of s and returns its record.
func (w *ingestTxn) segment(s *wire.Meta) (*taskRec, error) {
	in := groupInputs{s.ExplicitTask, s.Transport, s.SessionID, s.Source, s.HostPID}
	if w.group == "" || in != w.groupOf {
		w.group, w.explicit = groupOf(s)
		w.groupOf = in
		if s.ExplicitTask != "" && !w.explicit {
			w.t.logger.Warn("ignoring an invalid explicit task id", "task", s.ExplicitTask, "source", s.Source)
		}
	}
	group, explicit := w.group, w.explicit
	start, _ := stepTimes(s, w.now)
	if explicit {
		rec, err := w.rec(s.ExplicitTask)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return nil, err
		}
		return w.create(s.ExplicitTask, group, start)
	}
	// Most steps continue the group's latest task: skip the index
	// lookups for them.
	rec := w.latest[group]
	if c := w.t.latest[group]; rec == nil && c != nil {
		if rec = w.recs[c.ID]; rec == nil {
			rec = c.copy()
			w.recs[rec.ID] = rec
		}
		w.latest[group] = rec
	}
	if rec != nil && !start.Before(rec.StartedAt) && !start.After(rec.LastAt.Add(w.t.gap)) && !endedBefore(rec, start) {
		return rec, nil
	}
	prev, next, err := w.neighbours(group, start)
	if err != nil {
		return nil, err
	}
	if prev != nil && !start.After(prev.LastAt.Add(w.t.gap)) && !endedBefore(prev, start) {
		if next == nil {
			w.latest[group] = prev
		}
		return prev, nil
	}
	if next != nil && !next.StartedAt.After(start.Add(w.t.gap)) {
		// An earlier step of a task already seen (out-of-order delivery
		// from another sidecar of the same host): move its start back.
		if err := w.txn.Delete(groupKey(group, next.StartedAt)); err != nil {
			return nil, err
		}
		if err := w.txn.Set(groupKey(group, start), []byte(next.ID)); err != nil {
			return nil, err
		}
		return next, nil
	}
	rec, err = w.create(newTaskID(start), group, start)
	if err == nil && next == nil {
		w.latest[group] = rec
	}
	return rec, err
}

// endedBefore reports whether the agent said rec was finished before a
// step that started at start: the step belongs to a new task.
func endedBefore(rec *taskRec, start time.Time) bool {
	return !rec.FinalAt.IsZero() && start.After(rec.FinalAt)
}

func groupKey(group string, start time.Time) []byte {
	return key(pGroup, []byte(group), u64(uint64(start.UnixNano())))
}

// neighbours returns the task of group that started last at or before t,
// and the one that started first after it.
func (w *ingestTxn) neighbours(group string, t time.Time) (prev, next *taskRec, err error) {
	prefix := key(pGroup, []byte(group), nil)
	at := groupKey(group, t)
	find := func(reverse bool) (*taskRec, error) {
		it := badgerdb.KeyIterator(w.txn, prefix, reverse)
		defer it.Close()
		seek := at
		if reverse {
			seek = append(append([]byte(nil), at...), 0xff)
		} else {
			seek = key(pGroup, []byte(group), u64(uint64(t.UnixNano())+1))
		}
		it.Seek(seek)
		if !it.ValidForPrefix(prefix) {
			return nil, nil
		}
		id, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, err
		}
		return w.rec(string(id))
	}
	if prev, err = find(true); err != nil {
		return nil, nil, err
	}
	if next, err = find(false); err != nil {
		return nil, nil, err
	}
	return prev, next, nil
}

func (w *ingestTxn) create(id, group string, start time.Time) (*taskRec, error) {
	rec := &taskRec{Task: hindsight.Task{ID: id, StartedAt: start, Servers: []string{}}, Group: group}
	w.recs[id] = rec
	if err := w.txn.Set(groupKey(group, start), []byte(id)); err != nil {
		return nil, err
	}
	if err := w.txn.Set(key(pOpen, []byte(id)), nil); err != nil {
		return nil, err
	}
	return rec, nil
}

// newTaskID makes a task id that sorts by start time and reads as one:
// t-20261130-151627-3f9a1c.
func newTaskID(start time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "t-" + start.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}
