package traces

import (
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
)

// DefaultIdleGap ends a task after this much quiet.
const DefaultIdleGap = 10 * time.Minute

// Key layout of the trace store. Separators are NUL bytes, which task ids,
// sources and group names never contain (see ValidID).
//
//	run/SOURCE\0FIRST(8) → LAST(8)        runs of consecutive seqs ingested (dedupe)
//	seq/SOURCE\0SEQ(8)   → TASKID\0INDEX  a step ingested (dedupe; stores before runs)
//	task/TASKID          → taskRec (JSON)
//	step/TASKID\0IDX(4)  → hindsight.Step (JSON), or the steps IDX,
//	                       IDX+1… comma-separated (a chunk: one batch's
//	                       steps of the task, as the batch had them)
//	grp/GROUP\0START(8)  → TASKID         tasks of a group by start time
//	open/TASKID          → ""             tasks not final yet
//	unq/TASKID           → ""             final tasks not yet handed to reflection
//	closed/SESSION       → closeRec       sessions the sidecars said ended
//	hw/SOURCE            → SEQ(8)         highest seq ingested from a source
var (
	pSeq    = []byte("seq/")
	pRun    = []byte("run/")
	pTask   = []byte("task/")
	pStep   = []byte("step/")
	pGroup  = []byte("grp/")
	pOpen   = []byte("open/")
	pUnq    = []byte("unq/")
	pClosed = []byte("closed/")
	pHW     = []byte("hw/")
)

func key(prefix []byte, parts ...[]byte) []byte {
	k := append([]byte(nil), prefix...)
	for i, p := range parts {
		if i > 0 {
			k = append(k, 0)
		}
		k = append(k, p...)
	}
	return k
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// taskRec is a task as stored: the public Task without its steps, and what
// segmentation and finality need.
type taskRec struct {
	hindsight.Task
	Group      string          `json:"group"`
	LastAt     time.Time       `json:"last_at"`     // latest step time
	IngestedAt time.Time       `json:"ingested_at"` // wall clock of the last step's arrival
	Sessions   map[string]bool `json:"sessions"`    // session id → closed
	// FinalAt is when the agent said the task was finished (MarkFinal);
	// zero otherwise. Such a task takes no step that started after it
	// (unless it names the task explicitly), and is final again at the
	// next pass when a late step reopened it.
	FinalAt time.Time `json:"final_at,omitzero"`
}

// clone returns a copy of r that shares no memory with it, not even its
// strings' (which may be views of a request's body).
func (r *taskRec) clone() *taskRec {
	c := *r
	c.ID, c.Group, c.Reflection = strings.Clone(r.ID), strings.Clone(r.Group), strings.Clone(r.Reflection)
	c.Steps = nil
	if r.Servers != nil {
		c.Servers = make([]string, len(r.Servers))
		for i, s := range r.Servers {
			c.Servers[i] = strings.Clone(s)
		}
	}
	if r.Sessions != nil {
		c.Sessions = make(map[string]bool, len(r.Sessions))
		for k, v := range r.Sessions {
			c.Sessions[strings.Clone(k)] = v
		}
	}
	return &c
}

// update makes r, a record of Store.latest, rec: a later state of
// the same task. Like clone, it keeps no memory of rec's that may be a
// request's body: strings equal to r's stay r's, and r's sessions are
// kept when rec has the same ones (most batches add none).
func (r *taskRec) update(rec *taskRec) {
	old := *r
	*r = *rec
	r.ID, r.Steps = old.ID, nil
	r.Group, r.Reflection = keep(old.Group, rec.Group), keep(old.Reflection, rec.Reflection)
	if (rec.Servers == nil) != (old.Servers == nil) || !slices.Equal(rec.Servers, old.Servers) {
		r.Servers = nil
		if rec.Servers != nil {
			r.Servers = make([]string, len(rec.Servers))
			for i, s := range rec.Servers {
				r.Servers[i] = strings.Clone(s)
			}
		}
	} else {
		r.Servers = old.Servers
	}
	r.Sessions = old.Sessions
	if !sameKeys(rec.Sessions, old.Sessions) {
		r.Sessions = nil
		if rec.Sessions != nil {
			r.Sessions = make(map[string]bool, len(rec.Sessions))
		}
	}
	for k, v := range rec.Sessions {
		if cur, ok := r.Sessions[k]; !ok || cur != v {
			// Assigning to a string key stores the key given: the
			// stored one must be r's own.
			delete(r.Sessions, k)
			r.Sessions[strings.Clone(k)] = v
		}
	}
}

// keep returns old when it equals s, else a clone of s.
func keep(old, s string) string {
	if old == s {
		return old
	}
	return strings.Clone(s)
}

// sameKeys reports whether a and b are both nil, or both not and with the
// same keys.
func sameKeys(a, b map[string]bool) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// copy returns a copy of r that ingest may change without changing r: a
// record of Store.latest, whose strings are its own (see clone).
func (r *taskRec) copy() *taskRec {
	c := *r
	c.Servers = slices.Clip(r.Servers) // account appends, then sorts
	if r.Sessions != nil {
		c.Sessions = maps.Clone(r.Sessions)
	}
	return &c
}

// closeRec records that a sidecar said a session ended. When the sidecar
// named the last seq it sent, the close waits for that step to arrive.
type closeRec struct {
	At      time.Time `json:"at"`
	Source  string    `json:"source,omitempty"`
	LastSeq uint64    `json:"last_seq,omitempty"`
	Pending bool      `json:"pending,omitempty"`
}

func getJSON(txn *badger.Txn, k []byte, v any) error {
	item, err := txn.Get(k)
	if err != nil {
		return err
	}
	return item.Value(func(b []byte) error { return json.Unmarshal(b, v) })
}

func setJSON(txn *badger.Txn, k []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return txn.Set(k, b)
}
