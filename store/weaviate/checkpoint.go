package weaviate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// A checkpoint is what a set of deltas and hit counters of one epoch add
// up to, in a form where joining two of them is associative, commutative
// and idempotent (a state-based CRDT): each changed field and each
// evidence task keeps the value of the write ordered last (see stamp),
// the deltas are kept by token with what they added to the counters (so
// a delta folded into two checkpoints, or into one and still stored raw,
// counts once), and each hit counter keeps its greatest reading. Readers
// join every checkpoint, delta and counter they find and apply the join to
// the base; a compactor writes the join as one object and only then
// deletes what it folded (see compact.go). Whatever subset of a
// compaction a reader sees (the objects before it, the checkpoint and
// some of them, or the checkpoint alone), it computes the same state.
type checkpoint struct {
	Epoch   string                `json:"epoch"`
	Fields  map[string]stampedVal `json:"fields,omitempty"`
	Tasks   map[string]stampedIn  `json:"tasks,omitempty"`
	Edits   map[string]added      `json:"edits,omitempty"` // by delta token
	Updated int64                 `json:"updated,omitempty"`
	Hits    map[string]hits       `json:"hits,omitempty"` // by counter object id
}

// stamp orders writes: by the version they were made on, then an
// import's before an edit's, then time, then token. Of two edits of one
// field made on the same version, the later (then the greater token)
// wins; the other stays in its delta.
type stamp struct {
	Base  int    `json:"b"`
	Weak  bool   `json:"w,omitempty"`
	At    int64  `json:"a"`
	Token string `json:"t"`
}

func (x stamp) compare(y stamp) int {
	strong := func(s stamp) int {
		if s.Weak {
			return 0
		}
		return 1
	}
	return cmp.Or(cmp.Compare(x.Base, y.Base), cmp.Compare(strong(x), strong(y)), cmp.Compare(x.At, y.At), cmp.Compare(x.Token, y.Token))
}

type stampedVal struct {
	S stamp           `json:"s"`
	V json.RawMessage `json:"v"`
}

type stampedIn struct {
	S  stamp `json:"s"`
	In bool  `json:"in"`
}

// added is what one delta added to the counters.
type added struct {
	Evidence int `json:"e,omitempty"`
	Counter  int `json:"c,omitempty"`
}

// fromDelta is the checkpoint of d alone.
func fromDelta(d delta) checkpoint {
	s := stamp{Base: d.Base, Weak: d.Weak, At: d.At, Token: d.Token}
	cp := checkpoint{Epoch: d.Epoch, Fields: map[string]stampedVal{}, Tasks: map[string]stampedIn{},
		Edits: map[string]added{d.Token: {Evidence: d.Evidence, Counter: d.Counter}}, Updated: d.At}
	for k, v := range d.Set {
		if !folded[k] {
			cp.Fields[k] = stampedVal{S: s, V: v}
		}
	}
	for _, t := range d.DelTasks {
		cp.Tasks[t] = stampedIn{S: s}
	}
	for _, t := range d.AddTasks {
		cp.Tasks[t] = stampedIn{S: s, In: true}
	}
	return cp
}

// join adds o into cp (both of one epoch).
func (cp *checkpoint) join(o checkpoint) {
	if cp.Fields == nil {
		cp.Fields, cp.Tasks, cp.Edits, cp.Hits = map[string]stampedVal{}, map[string]stampedIn{}, map[string]added{}, map[string]hits{}
	}
	for k, v := range o.Fields {
		if cur, ok := cp.Fields[k]; !ok || cmp.Or(v.S.compare(cur.S), bytes.Compare(v.V, cur.V)) > 0 {
			cp.Fields[k] = v
		}
	}
	for k, v := range o.Tasks {
		if cur, ok := cp.Tasks[k]; !ok || v.S.compare(cur.S) > 0 || (v.S == cur.S && v.In) {
			cp.Tasks[k] = v
		}
	}
	maps.Copy(cp.Edits, o.Edits)
	cp.Updated = max(cp.Updated, o.Updated)
	for k, h := range o.Hits {
		cur := cp.Hits[k]
		cur.Epoch, cur.Count, cur.Last = h.Epoch, max(cur.Count, h.Count), max(cur.Last, h.Last)
		cp.Hits[k] = cur
	}
}

// gather joins the checkpoints, deltas and hit counters of epoch.
func gather(epoch string, cps []checkpoint, ds []delta, hs []hits) checkpoint {
	cp := checkpoint{Epoch: epoch}
	cp.join(checkpoint{})
	for _, c := range cps {
		if c.Epoch == epoch {
			cp.join(c)
		}
	}
	for _, d := range ds {
		if d.Epoch == epoch {
			cp.join(fromDelta(d))
		}
	}
	for _, h := range hs {
		if h.Epoch == epoch && h.Count > 0 {
			cp.join(checkpoint{Hits: map[string]hits{h.OID: h}})
		}
	}
	return cp
}

// apply returns base after cp: the fields cp changed, a version per
// delta, counters and hits added, evidence tasks added and removed (those
// added after the base's, in write order).
func (cp *checkpoint) apply(base *hindsight.Experience) (*hindsight.Experience, error) {
	m, err := fields(base)
	if err != nil {
		return nil, fmt.Errorf("fold experience: %w", err)
	}
	for k, v := range cp.Fields {
		if !folded[k] {
			m[k] = v.V
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("fold experience: %w", err)
	}
	e := new(hindsight.Experience)
	if err := json.Unmarshal(b, e); err != nil {
		return nil, fmt.Errorf("fold experience: %w", err)
	}
	e.Vector = base.Vector
	e.Version += len(cp.Edits)
	for _, a := range cp.Edits {
		e.EvidenceCount += a.Evidence
		e.CounterCount += a.Counter
	}
	tasks := slices.DeleteFunc(slices.Clone(base.EvidenceTasks), func(t string) bool {
		v, ok := cp.Tasks[t]
		return ok && !v.In
	})
	var more []string
	for t, v := range cp.Tasks {
		if v.In && !slices.Contains(tasks, t) {
			more = append(more, t)
		}
	}
	slices.SortFunc(more, func(x, y string) int { return cmp.Or(cp.Tasks[x].S.compare(cp.Tasks[y].S), cmp.Compare(x, y)) })
	if e.EvidenceTasks = append(tasks, more...); len(e.EvidenceTasks) == 0 {
		e.EvidenceTasks = nil
	}
	if at := time.Unix(0, cp.Updated).UTC(); len(cp.Edits) > 0 && at.After(e.UpdatedAt) {
		e.UpdatedAt = at
	}
	for _, h := range cp.Hits {
		if h.Count <= 0 {
			continue
		}
		e.HitCount += h.Count
		if at := time.Unix(0, h.Last).UTC(); e.LastHitAt == nil || at.After(*e.LastHitAt) {
			e.LastHitAt = &at
		}
	}
	return e, nil
}
