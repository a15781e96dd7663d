package weaviate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/go-openapi/strfmt"
	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/filters"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/graphql"
	"github.com/weaviate/weaviate/entities/models"
)

// Compaction keeps the objects a read folds few. A read that finds more
// than compactAt delta objects of an experience (or more than Weaviate
// lists at once, QUERY_MAXIMUM_RESULTS, 10,000 by default) compacts them
// before folding: it reads them in one query, joins those of the
// experience's epoch into a checkpoint (checkpoint.go), writes it as one
// object whose id is derived from its content, and only then deletes the
// objects it read (those of other epochs too: no reader folds them). No
// lock is taken: a compactor that dies after writing its checkpoint
// leaves objects a reader joins with it to the same state (their deltas
// count once by token, counters by their greatest reading), two at once
// write two checkpoints that join as well, and each deletes only what it
// read and folded. Legacy per-instance hit counters are folded and
// deleted too: their writer rewrites its whole count at its next hit.

// compactAt is the number of delta objects above which a read compacts.
const compactAt = 64

// maxCompactRounds bounds the compactions of one read.
const maxCompactRounds = 4

// listMax is how many objects one compaction reads at most (Weaviate's
// default QUERY_MAXIMUM_RESULTS); more are compacted in further rounds.
const listMax = 10_000

// Stats counts what the store did since it was opened.
type Stats struct {
	Compactions int64 // checkpoints written
	Folded      int64 // delta objects folded into them
	Deleted     int64 // delta objects deleted after their checkpoint was written
	Fetched     int64 // delta objects read from Weaviate (not from the cache)
	Failovers   int64 // moves to another node after a dial error (Config.Failover)
}

type stats struct{ compactions, folded, deleted, fetched atomic.Int64 }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	st := Stats{Compactions: s.st.compactions.Load(), Folded: s.st.folded.Load(),
		Deleted: s.st.deleted.Load(), Fetched: s.st.fetched.Load()}
	if s.fo != nil {
		st.Failovers = s.fo.switches.Load()
	}
	return st
}

// errCompactStopped ends a compaction stopped by a test after its
// checkpoint was written (as a process killed then would).
var errCompactStopped = errors.New("compaction stopped after its checkpoint")

// compact folds the delta objects of ns/id (of epoch) into a checkpoint
// and deletes them; it reports whether anything was folded.
func (s *Store) compact(ctx context.Context, ns, id, epoch string) (bool, error) {
	objs, err := s.readAll(ctx, ns, id)
	if err != nil {
		return false, fmt.Errorf("compact deltas of %q: %w", id, err)
	}
	var cps []checkpoint
	var ds []delta
	var hs []hits
	for oid, o := range objs {
		switch o.kind {
		case kindCheckpoint:
			var cp checkpoint
			if err := json.Unmarshal([]byte(o.doc), &cp); err != nil {
				return false, fmt.Errorf("compact deltas of %q: decode checkpoint %s: %w", id, oid, err)
			}
			cps = append(cps, cp)
		case kindEdit:
			var d delta
			if err := json.Unmarshal([]byte(o.doc), &d); err != nil {
				return false, fmt.Errorf("compact deltas of %q: decode delta %s: %w", id, oid, err)
			}
			ds = append(ds, d)
		case kindHits:
			h := hits{OID: oid}
			if err := json.Unmarshal([]byte(o.doc), &h); err != nil {
				return false, fmt.Errorf("compact deltas of %q: decode hit counter %s: %w", id, oid, err)
			}
			hs = append(hs, h)
		}
	}
	cp := gather(epoch, cps, ds, hs)
	doc, err := json.Marshal(cp)
	if err != nil {
		return false, fmt.Errorf("compact deltas of %q: %w", id, err)
	}
	cid := uuid.NewSHA1(idSpace, []byte("checkpoint\x00"+rank.Namespace(ns)+"\x00"+id+"\x00"+string(doc))).String()
	if _, ok := objs[cid]; ok && len(objs) == 1 {
		return false, nil
	}
	obj := &models.Object{Class: s.deltaClass(), ID: strfmt.UUID(cid), Tenant: Tenant(ns),
		Properties: map[string]any{"hid": id, "kind": kindCheckpoint, "doc": string(doc)}}
	if err := s.write(ctx, obj); err != nil {
		return false, fmt.Errorf("compact deltas of %q: write checkpoint: %w", id, err)
	}
	s.st.compactions.Add(1)
	s.st.folded.Add(int64(len(objs)))
	if s.stopAfterCheckpoint {
		return true, errCompactStopped
	}
	var gone []string
	for oid := range objs {
		if oid != cid {
			gone = append(gone, oid)
		}
	}
	if err := s.deleteObjects(ctx, ns, gone); err != nil {
		return true, fmt.Errorf("compact deltas of %q: %w", id, err)
	}
	s.dmu.Lock()
	for _, oid := range gone {
		delete(s.deltas, oid)
		delete(s.cps, oid)
	}
	s.dmu.Unlock()
	return true, nil
}

// rawObject is a delta object as read: its kind and document.
type rawObject struct{ kind, doc string }

// readAll reads up to listMax delta objects of ns/id in one query, by
// object id. A replicated query asks one replica: what it lacks is not
// folded, and so not deleted.
func (s *Store) readAll(ctx context.Context, ns, id string) (map[string]rawObject, error) {
	get := s.c.GraphQL().Get().WithClassName(s.deltaClass()).WithTenant(Tenant(ns)).WithLimit(listMax).
		WithWhere(byID(id)).WithFields(graphql.Field{Name: "kind"}, graphql.Field{Name: "doc"},
		graphql.Field{Name: "_additional", Fields: []graphql.Field{{Name: "id"}}})
	if s.repl.cl != "" {
		get = get.WithConsistencyLevel(s.repl.cl)
	}
	resp, err := s.query(ctx, get)
	if err != nil {
		return nil, fmt.Errorf("read deltas: %w", err)
	}
	data, _ := resp.Data["Get"].(map[string]any)
	raw, err := json.Marshal(data[s.deltaClass()])
	if err != nil {
		return nil, fmt.Errorf("read deltas: %w", err)
	}
	var rows []struct {
		Kind       string `json:"kind"`
		Doc        string `json:"doc"`
		Additional struct {
			ID string `json:"id"`
		} `json:"_additional"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		return nil, fmt.Errorf("read deltas: decode: %w", err)
	}
	out := make(map[string]rawObject, len(rows))
	for _, r := range rows {
		out[r.Additional.ID] = rawObject{kind: r.Kind, doc: r.Doc}
	}
	s.st.fetched.Add(int64(len(rows)))
	return out, nil
}

// query runs a GraphQL query, retried while transient; an error in the
// answer is an error.
func (s *Store) query(ctx context.Context, get *graphql.GetBuilder) (*models.GraphQLResponse, error) {
	var resp *models.GraphQLResponse
	err := s.retry(ctx, func() (err error) {
		resp, err = get.Do(ctx)
		if err == nil && len(resp.Errors) > 0 {
			err = errors.New(resp.Errors[0].Message)
		}
		return err
	})
	return resp, err
}

// deleteBatch bounds the ids one delete request names.
const deleteBatch = 500

// deleteObjects deletes delta objects of ns by object id.
func (s *Store) deleteObjects(ctx context.Context, ns string, oids []string) error {
	for i := 0; i < len(oids); i += deleteBatch {
		part := oids[i:min(i+deleteBatch, len(oids))]
		err := s.retry(ctx, func() error {
			d := s.c.Batch().ObjectsBatchDeleter().WithClassName(s.deltaClass()).WithTenant(Tenant(ns)).
				WithWhere(filters.Where().WithPath([]string{"id"}).WithOperator(filters.ContainsAny).WithValueText(part...))
			if s.repl.cl != "" {
				d = d.WithConsistencyLevel(s.repl.cl)
			}
			_, err := d.Do(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("delete folded deltas: %w", err)
		}
		s.st.deleted.Add(int64(len(part)))
	}
	return nil
}

var (
	descCompactions = prometheus.NewDesc("hindsight_weaviate_compactions_total",
		"Checkpoints written: delta objects of an experience folded into one.", nil, nil)
	descFolded = prometheus.NewDesc("hindsight_weaviate_deltas_folded_total",
		"Delta objects folded into checkpoints.", nil, nil)
	descDeleted = prometheus.NewDesc("hindsight_weaviate_deltas_deleted_total",
		"Delta objects deleted once a checkpoint held them.", nil, nil)
	descFetched = prometheus.NewDesc("hindsight_weaviate_deltas_fetched_total",
		"Delta objects read from Weaviate (each once per process, counters every time).", nil, nil)
	descFailovers = prometheus.NewDesc("hindsight_weaviate_failovers_total",
		"Moves of the store's REST requests to another node of the cluster after a dial error.", nil, nil)
)

// Describe sends the descriptions of the store's metrics (Stats).
func (s *Store) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCompactions, descFolded, descDeleted, descFetched, descFailovers} {
		ch <- d
	}
}

// Collect sends the store's metrics (Stats).
func (s *Store) Collect(ch chan<- prometheus.Metric) {
	st := s.Stats()
	for d, v := range map[*prometheus.Desc]int64{descCompactions: st.Compactions, descFolded: st.Folded,
		descDeleted: st.Deleted, descFetched: st.Fetched, descFailovers: st.Failovers} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
}
