package weaviate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hindsight-proxy/hindsight"
)

// An experience in Weaviate is a base and the deltas written over it; its
// state is folded from them (see delta.go for how they are stored). A
// delta is one Put: the fields it changed and what it added to the
// counters and sets. Deltas are never rewritten, so two writers never
// overwrite each other; the fold puts them in one deterministic order, so
// every reader that sees the same deltas computes the same state.

// delta is one write of an experience over the base of epoch.
type delta struct {
	Epoch string `json:"epoch"` // the base it applies to; deltas of another base are ignored
	Base  int    `json:"base"`  // the version the writer read
	At    int64  `json:"at"`    // when it was written, Unix nanoseconds
	Token string `json:"token"` // unique to the write; breaks ties
	// Weak marks an import's write: of two changes of one field made on
	// the same version, an edit's wins over it whatever their times.
	Weak bool `json:"weak,omitempty"`
	// Set holds the fields it changed (JSON names of hindsight.Experience),
	// null for a field it cleared.
	Set      map[string]json.RawMessage `json:"set,omitempty"`
	AddTasks []string                   `json:"add_tasks,omitempty"`
	DelTasks []string                   `json:"del_tasks,omitempty"`
	Evidence int                        `json:"evidence,omitempty"` // added to EvidenceCount
	Counter  int                        `json:"counter,omitempty"`  // added to CounterCount
}

// hits is one store instance's hit counter of an experience: the hits it
// recorded on the base of epoch and the latest of them. Its writer only
// raises it, so of two reads of one counter the greater is the later.
type hits struct {
	OID   string `json:"-"` // the counter's object id
	Epoch string `json:"epoch"`
	Count int    `json:"count"`
	Last  int64  `json:"last"` // Unix nanoseconds
}

// folded is what is not a plain field: it changes through the counters,
// sets and clocks of deltas, or never.
var folded = map[string]bool{
	"id": true, "namespace": true, "version": true, "created_at": true, "updated_at": true,
	"hit_count": true, "last_hit_at": true, "evidence_count": true, "counter_count": true,
	"evidence_tasks": true, "embedder": true,
}

// fields returns e's JSON fields by name.
func fields(e *hindsight.Experience) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	return m, json.Unmarshal(b, &m)
}

// diff returns the delta that turns cur (the state read) into next.
func diff(cur, next *hindsight.Experience) (delta, error) {
	a, err := fields(cur)
	if err != nil {
		return delta{}, fmt.Errorf("diff experience: %w", err)
	}
	b, err := fields(next)
	if err != nil {
		return delta{}, fmt.Errorf("diff experience: %w", err)
	}
	d := delta{Base: cur.Version, Set: map[string]json.RawMessage{},
		Evidence: next.EvidenceCount - cur.EvidenceCount, Counter: next.CounterCount - cur.CounterCount}
	for k, v := range b {
		if !folded[k] && !bytes.Equal(a[k], v) {
			d.Set[k] = v
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok && !folded[k] {
			d.Set[k] = json.RawMessage("null")
		}
	}
	for _, t := range next.EvidenceTasks {
		if !slices.Contains(cur.EvidenceTasks, t) {
			d.AddTasks = append(d.AddTasks, t)
		}
	}
	for _, t := range cur.EvidenceTasks {
		if !slices.Contains(next.EvidenceTasks, t) {
			d.DelTasks = append(d.DelTasks, t)
		}
	}
	return d, nil
}

// fold returns the state of base (of epoch) after the checkpoints, deltas
// and hit counters of epoch; the others are ignored. They are joined into
// one checkpoint first (see checkpoint.go), so that an object seen twice,
// raw and folded into a checkpoint or in two checkpoints, counts once.
func fold(base *hindsight.Experience, epoch string, cps []checkpoint, ds []delta, hs []hits) (*hindsight.Experience, error) {
	cp := gather(epoch, cps, ds, hs)
	return cp.apply(base)
}
