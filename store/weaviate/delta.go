package weaviate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-openapi/strfmt"
	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/filters"
	"github.com/weaviate/weaviate/entities/models"
	"golang.org/x/sync/errgroup"
)

// Weaviate has no compare-and-set, and creating an object whose id exists
// is not one either: the existence check and the write are separate
// steps, so two creates of one id can both succeed (the claims
// this package used before lost an edit that way on a 3-node cluster).
// Instead no write ever replaces another's: each update of an experience
// is stored as its own object, a delta with an id no other write uses (a
// random token), in the delta collection of the experience's tenant, and
// the experience's state is folded from its base and all its deltas (see
// fold.go): changed fields by a deterministic order, evidence and counter
// counts added, evidence tasks as a set, hits as one counter per store
// instance (written by that instance only). A reader finds the deltas of an
// experience with a dry-run batch delete filtered on its id: Weaviate
// answers it from as many replicas as the consistency level asks and
// returns the union of their ids, so at QUORUM it overlaps every QUORUM
// write that completed. Nothing depends on timing.
//
// Consistency levels ALL for claims with a fencing token were the other
// option; Weaviate cannot check a token on the write-back (there is no
// conditional write), and ALL refuses writes while a node is down.
//
// The experience's own object holds the base ("basedoc", "epoch") and a
// view: the state folded by its last writer, which Search and List read.
// After writing a delta a writer folds and writes the view, then reads the
// deltas again and folds and writes again until nothing changed meanwhile:
// any delta it did not see completed after that check, and its writer's
// own view write comes later and sees this one's, so the view converges.
// An experience costs one small object per edit (and one per store
// instance that recorded hits) until a read finds too many and compacts
// them into a checkpoint (compact.go); a read fetches each delta and
// checkpoint once per process (they are immutable and cached).

// Kinds of objects of the delta collection.
const (
	kindEdit       = "edit"       // a delta
	kindHits       = "hits"       // a store instance's hit counter
	kindCheckpoint = "checkpoint" // deltas and counters folded (compact.go)
)

// deltaClass is the collection of the deltas of s.class.
func (s *Store) deltaClass() string { return s.class + "Delta" }

// hitsID is the object id of this store instance's hit counter of ns/id
// over the base of epoch.
func (s *Store) hitsID(ns, id, epoch string) string {
	return uuid.NewSHA1(idSpace, []byte("hits\x00"+rank.Namespace(ns)+"\x00"+id+"\x00"+epoch+"\x00"+s.instance)).String()
}

// migrateDeltas creates the delta collection when it is missing.
func (s *Store) migrateDeltas(ctx context.Context) error {
	var ok bool
	exists := func() error {
		return s.retry(ctx, func() (err error) {
			ok, err = s.c.Schema().ClassExistenceChecker().WithClassName(s.deltaClass()).Do(ctx)
			return err
		})
	}
	if err := exists(); err != nil || ok {
		return err
	}
	class := &models.Class{
		Class:       s.deltaClass(),
		Description: "hindsight deltas of " + s.class,
		Properties: []*models.Property{
			{Name: "hid", DataType: []string{"text"}, Tokenization: models.PropertyTokenizationField,
				IndexFilterable: ptr(true), IndexSearchable: ptr(false)},
			{Name: "kind", DataType: []string{"text"}, IndexFilterable: ptr(false), IndexSearchable: ptr(false)},
			{Name: "doc", DataType: []string{"text"}, IndexFilterable: ptr(false), IndexSearchable: ptr(false)},
		},
		Vectorizer:         "none",
		VectorIndexConfig:  map[string]any{"skip": true},
		MultiTenancyConfig: &models.MultiTenancyConfig{Enabled: true, AutoTenantCreation: true, AutoTenantActivation: true},
		// A delta a compaction deleted while a node was down stays
		// deleted when the node is back (its checkpoint counts it once
		// anyway, but it would cost reads again).
		ReplicationConfig: &models.ReplicationConfig{Factor: int64(max(s.repl.factor, 1)), AsyncEnabled: s.repl.factor > 1,
			DeletionStrategy: models.ReplicationConfigDeletionStrategyDeleteOnConflict},
	}
	if err := s.c.Schema().ClassCreator().WithClass(class).Do(ctx); err != nil {
		if err2 := exists(); err2 != nil || !ok { // another process may have made it
			return fmt.Errorf("create collection %s: %w", s.deltaClass(), err)
		}
	}
	return nil
}

// ensureDeltaTenant creates ns's tenant in the delta collection.
func (s *Store) ensureDeltaTenant(ctx context.Context, ns string) error {
	t := Tenant(ns)
	key := "delta\x00" + t
	known := s.tenants.has(key)
	if known {
		return nil
	}
	var ok bool
	err := s.retry(ctx, func() (err error) {
		ok, err = s.c.Schema().TenantsExists().WithClassName(s.deltaClass()).WithTenant(t).Do(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("check delta tenant %s: %w", t, err)
	}
	if !ok {
		err := s.retry(ctx, func() error {
			return s.c.Schema().TenantsCreator().WithClassName(s.deltaClass()).
				WithTenants(models.Tenant{Name: t, ActivityStatus: models.TenantActivityStatusHOT}).Do(ctx)
		})
		if err != nil && !strings.Contains(strings.ToLower(err.Error()), "exist") {
			return fmt.Errorf("create delta tenant %s: %w", t, err)
		}
	}
	s.tenants.add(key)
	return nil
}

// deltaObject is the object of a delta (kind "edit", id its token) or a
// hit counter (kind "hits") of ns/id.
func (s *Store) deltaObject(ns, id, oid, kind string, v any) (*models.Object, error) {
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &models.Object{Class: s.deltaClass(), ID: strfmt.UUID(oid), Tenant: Tenant(ns),
		Properties: map[string]any{"hid": id, "kind": kind, "doc": string(doc)}}, nil
}

// byID matches the deltas of experience id.
func byID(id string) *filters.WhereBuilder {
	return filters.Where().WithPath([]string{"hid"}).WithOperator(filters.Equal).WithValueText(id)
}

// deltaIDs returns the object ids of the delta objects of ns/id, the
// union over the replicas the consistency level reads, and whether there
// are more than Weaviate lists at once (then the ids are not all there).
func (s *Store) deltaIDs(ctx context.Context, ns, id string) ([]string, bool, error) {
	var res *models.BatchDeleteResponse
	err := s.retry(ctx, func() (err error) {
		d := s.c.Batch().ObjectsBatchDeleter().WithClassName(s.deltaClass()).WithTenant(Tenant(ns)).
			WithWhere(byID(id)).WithDryRun(true).WithOutput("verbose")
		if s.repl.cl != "" {
			d = d.WithConsistencyLevel(s.repl.cl)
		}
		res, err = d.Do(ctx)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list deltas of %q: %w", id, err)
	}
	if res == nil || res.Results == nil {
		return nil, false, nil
	}
	ids := make([]string, 0, len(res.Results.Objects))
	for _, o := range res.Results.Objects {
		ids = append(ids, string(o.ID))
	}
	return ids, res.Results.Matches > int64(len(res.Results.Objects)), nil
}

// deltaReads bounds the deltas one fold reads at once.
const deltaReads = 8

// readDeltas reads the delta objects of ns with object ids oids: deltas,
// checkpoints and hit counters. Deltas and checkpoints come from the
// cache after their first read (they never change); hit counters are read
// every time. Reads run deltaReads at a time.
func (s *Store) readDeltas(ctx context.Context, ns string, oids []string) ([]checkpoint, []delta, []hits, error) {
	type read struct {
		kind, doc string
	}
	reads := make([]read, len(oids))
	var cps []checkpoint
	var ds []delta
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deltaReads)
	for i, oid := range oids {
		s.dmu.Lock()
		d, isDelta := s.deltas[oid]
		cp, isCheckpoint := s.cps[oid]
		s.dmu.Unlock()
		switch {
		case isDelta:
			ds = append(ds, d)
			continue
		case isCheckpoint:
			cps = append(cps, cp)
			continue
		}
		g.Go(func() (err error) {
			reads[i].kind, reads[i].doc, err = s.readDelta(gctx, ns, oid)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, nil, err
	}
	var hs []hits
	for i, r := range reads {
		var err error
		switch r.kind {
		case kindEdit:
			var d delta
			if err = json.Unmarshal([]byte(r.doc), &d); err == nil {
				s.dmu.Lock()
				s.deltas[oids[i]] = d
				s.dmu.Unlock()
				ds = append(ds, d)
			}
		case kindCheckpoint:
			var cp checkpoint
			if err = json.Unmarshal([]byte(r.doc), &cp); err == nil {
				s.dmu.Lock()
				s.cps[oids[i]] = cp
				s.dmu.Unlock()
				cps = append(cps, cp)
			}
		case kindHits:
			h := hits{OID: oids[i]}
			if err = json.Unmarshal([]byte(r.doc), &h); err == nil {
				hs = append(hs, h)
			}
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("decode %s %s: %w", r.kind, oids[i], err)
		}
	}
	return cps, ds, hs, nil
}

// readDelta reads one object of the delta collection ("" kind when it is
// gone: purged meanwhile).
func (s *Store) readDelta(ctx context.Context, ns, oid string) (kind, doc string, err error) {
	obj, err := s.getObject(ctx, s.deltaClass(), ns, oid, false)
	s.st.fetched.Add(1)
	if err != nil {
		return "", "", fmt.Errorf("read delta %s: %w", oid, err)
	}
	if obj == nil {
		return "", "", nil
	}
	m, _ := obj.Properties.(map[string]any)
	kind, _ = m["kind"].(string)
	doc, _ = m["doc"].(string)
	return kind, doc, nil
}

// dropDeltas deletes every delta and hit counter of ns/id.
func (s *Store) dropDeltas(ctx context.Context, ns, id string) error {
	if err := s.ensureDeltaTenant(ctx, ns); err != nil {
		return err
	}
	return s.retry(ctx, func() error {
		d := s.c.Batch().ObjectsBatchDeleter().WithClassName(s.deltaClass()).WithTenant(Tenant(ns)).WithWhere(byID(id))
		if s.repl.cl != "" {
			d = d.WithConsistencyLevel(s.repl.cl)
		}
		_, err := d.Do(ctx)
		return err
	})
}
