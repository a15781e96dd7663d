package weaviate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/fault"
	"github.com/weaviate/weaviate/entities/models"
)

// Weaviate has no compare-and-set, but creating an object whose id exists
// fails ("id already exists", checked at the request's consistency level).
// Writes of an experience therefore claim the state they replace: before
// writing over the object whose write token is base, a writer creates the
// claim object claimID(ns, id, base) in the claim collection. One writer
// creates it; the others learn that the state they read is being replaced
// and read again. The claim holds the winner's token ("by") and when it was
// made ("at"). Weaviate checks that an id is free before it stores the
// object, so creates at the same moment can both succeed: each writer reads
// its claim back (verifyClaim) and only the one whose token stays writes.
// A claim whose writer never wrote (a crash between claim and
// write) is broken after claimTimeout. Claims are tiny (no vector, no
// content) and are deleted two generations on.

// claimTimeout is how long a claim may stand over an object still in the
// state it claimed before another writer breaks it.
const claimTimeout = 30 * time.Second

// claimClass is the collection of the claims of s.class.
func (s *Store) claimClass() string { return s.class + "Claim" }

// claimID is the id of the claim on the state of ns/id written with base.
func claimID(ns, id, base string) string {
	return uuid.NewSHA1(idSpace, []byte("claim\x00"+rank.Namespace(ns)+"\x00"+id+"\x00"+base)).String()
}

// baseOf is the state a write replaces: the stored object's write token
// (its version for one written before tokens, "" for none).
func baseOf(old stored) string {
	switch {
	case old.Experience == nil:
		return "new"
	case old.token != "":
		return old.token
	}
	return fmt.Sprintf("v%d", old.Version)
}

// migrateClaims creates the claim collection when it is missing.
func (s *Store) migrateClaims(ctx context.Context) error {
	var ok bool
	err := s.retry(ctx, func() (err error) {
		ok, err = s.c.Schema().ClassExistenceChecker().WithClassName(s.claimClass()).Do(ctx)
		return err
	})
	if err != nil || ok {
		return err
	}
	class := &models.Class{
		Class:       s.claimClass(),
		Description: "hindsight write claims of " + s.class,
		Properties: []*models.Property{
			{Name: "by", DataType: []string{"text"}, IndexFilterable: ptr(false), IndexSearchable: ptr(false)},
			{Name: "at", DataType: []string{"int"}, IndexFilterable: ptr(false)},
		},
		Vectorizer:         "none",
		VectorIndexConfig:  map[string]any{"skip": true},
		MultiTenancyConfig: &models.MultiTenancyConfig{Enabled: true, AutoTenantCreation: true, AutoTenantActivation: true},
		ReplicationConfig:  &models.ReplicationConfig{Factor: int64(max(s.factor, 1)), AsyncEnabled: s.factor > 1},
	}
	if err := s.c.Schema().ClassCreator().WithClass(class).Do(ctx); err != nil {
		var again bool
		if err2 := s.retry(ctx, func() (err error) {
			again, err = s.c.Schema().ClassExistenceChecker().WithClassName(s.claimClass()).Do(ctx)
			return err
		}); err2 != nil || !again {
			return fmt.Errorf("create collection %s: %w", s.claimClass(), err)
		}
	}
	return nil
}

// ensureClaimTenant creates ns's tenant in the claim collection.
func (s *Store) ensureClaimTenant(ctx context.Context, ns string) error {
	t := Tenant(ns)
	key := "claim\x00" + t
	s.tmu.Lock()
	known := s.tenants[key]
	s.tmu.Unlock()
	if known {
		return nil
	}
	var ok bool
	err := s.retry(ctx, func() (err error) {
		ok, err = s.c.Schema().TenantsExists().WithClassName(s.claimClass()).WithTenant(t).Do(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("check claim tenant %s: %w", t, err)
	}
	if !ok {
		err := s.retry(ctx, func() error {
			return s.c.Schema().TenantsCreator().WithClassName(s.claimClass()).
				WithTenants(models.Tenant{Name: t, ActivityStatus: models.TenantActivityStatusHOT}).Do(ctx)
		})
		if err != nil && !strings.Contains(strings.ToLower(err.Error()), "exist") {
			return fmt.Errorf("create claim tenant %s: %w", t, err)
		}
	}
	s.tmu.Lock()
	s.tenants[key] = true
	s.tmu.Unlock()
	return nil
}

// claim tries to claim the state base of ns/id for the write token. It
// reports whether this writer holds the claim. A stale claim (older than
// claimTimeout) is broken and tried again.
func (s *Store) claim(ctx context.Context, ns, id, base, token string) (bool, error) {
	if err := s.ensureClaimTenant(ctx, ns); err != nil {
		return false, err
	}
	cid := claimID(ns, id, base)
	for attempt := 0; attempt < 2; attempt++ {
		start := time.Now()
		err := s.retry(ctx, func() error {
			c := s.c.Data().Creator().WithClassName(s.claimClass()).WithID(cid).WithTenant(Tenant(ns)).
				WithProperties(map[string]any{"by": token, "at": s.now().UnixMilli()})
			if s.cl != "" {
				c = c.WithConsistencyLevel(s.cl)
			}
			_, err := c.Do(ctx)
			return err
		})
		if err == nil {
			return s.verifyClaim(ctx, ns, cid, token, time.Since(start))
		}
		if !exists(err) {
			return false, fmt.Errorf("claim: %w", err)
		}
		// Held: by this writer (a retried create whose first try
		// succeeded), by another, or stale.
		by, at, err := s.readClaim(ctx, ns, cid)
		if err != nil {
			return false, err
		}
		if by == token {
			return true, nil
		}
		if by == "" || s.now().Sub(time.UnixMilli(at)) < claimTimeout || attempt > 0 {
			return false, nil
		}
		s.log.Warn("weaviate: breaking a stale write claim", "namespace", ns, "id", id, "age", s.now().Sub(time.UnixMilli(at)))
		s.dropClaim(ctx, ns, cid)
	}
	return false, nil
}

// claimSettle is the least time a writer waits before reading its claim a
// second time; it waits twice as long as its own create took when that is
// longer (a loaded or replicated cluster): another create of the same claim
// that passed the server's existence check before this one was stored
// lands within about the time a create takes.
const claimSettle = 25 * time.Millisecond

// maxClaimSettle bounds that wait.
const maxClaimSettle = 2 * time.Second

// verifyClaim reads a claim just created back, at once and after
// the settle time: Weaviate checks that an id is free and then stores the
// object, so two creates at the same moment can both succeed, the later
// one overwriting the earlier. The writer whose token stays is the one
// that holds the claim (the last to store it always sees its own).
func (s *Store) verifyClaim(ctx context.Context, ns, cid, token string, took time.Duration) (bool, error) {
	settle := min(max(claimSettle, 2*took), maxClaimSettle)
	for i := 0; i < 2; i++ {
		if i == 1 {
			select {
			case <-time.After(settle):
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		by, _, err := s.readClaim(ctx, ns, cid)
		if err != nil {
			return false, err
		}
		if by != token {
			return false, nil
		}
	}
	return true, nil
}

// readClaim returns the holder and time of a claim ("" when it is gone).
func (s *Store) readClaim(ctx context.Context, ns, cid string) (by string, at int64, err error) {
	var objs []*models.Object
	err = s.retry(ctx, func() (err error) {
		g := s.c.Data().ObjectsGetter().WithClassName(s.claimClass()).WithID(cid).WithTenant(Tenant(ns))
		if s.cl != "" {
			g = g.WithConsistencyLevel(s.cl)
		}
		objs, err = g.Do(ctx)
		if notFound(err) {
			objs, err = nil, nil
		}
		return err
	})
	if err != nil || len(objs) == 0 {
		return "", 0, err
	}
	m, _ := objs[0].Properties.(map[string]any)
	by, _ = m["by"].(string)
	switch v := m["at"].(type) {
	case float64:
		at = int64(v)
	case int64:
		at = v
	}
	return by, at, nil
}

// dropClaim deletes a claim; failures are logged (a claim left over costs
// a few bytes).
func (s *Store) dropClaim(ctx context.Context, ns, cid string) {
	// A namespace written only by Import has no claim tenant yet; asking
	// Weaviate to delete from a missing tenant would be retried as a
	// tenant still on its way.
	if err := s.ensureClaimTenant(ctx, ns); err != nil {
		s.log.Debug("weaviate: drop write claim", "err", err)
		return
	}
	err := s.retry(ctx, func() error {
		d := s.c.Data().Deleter().WithClassName(s.claimClass()).WithID(cid).WithTenant(Tenant(ns))
		if s.cl != "" {
			d = d.WithConsistencyLevel(s.cl)
		}
		if err := d.Do(ctx); err != nil && !notFound(err) {
			return err
		}
		return nil
	})
	if err != nil {
		s.log.Debug("weaviate: drop write claim", "err", err)
	}
}

// exists reports whether err is Weaviate's refusal to create an object
// whose id exists.
func exists(err error) bool {
	var we *fault.WeaviateClientError
	return errors.As(err, &we) && we.StatusCode == 422 && strings.Contains(err.Error(), "already exists")
}
