package weaviate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/fault"
	"github.com/weaviate/weaviate/entities/models"
)

var tenantRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Tenant returns the Weaviate tenant of a namespace: the namespace itself
// when Weaviate accepts it as a tenant name, else "ns-" and a hash of it.
func Tenant(namespace string) string {
	ns := rank.Namespace(namespace)
	if tenantRE.MatchString(ns) {
		return ns
	}
	h := sha256.Sum256([]byte(ns))
	return "ns-" + hex.EncodeToString(h[:16])
}

var idSpace = uuid.MustParse("5d6b3f0e-7c1a-4b8e-9a57-3f1f0c2d8e11")

// objectID is the Weaviate object id of an experience.
func objectID(ns, id string) string {
	return uuid.NewSHA1(idSpace, []byte(rank.Namespace(ns)+"\x00"+id)).String()
}

// hasTenant reports whether ns has a tenant; with create it makes one.
func (s *Store) hasTenant(ctx context.Context, ns string, create bool) (bool, error) {
	t := Tenant(ns)
	known := s.tenants.has(t)
	if known {
		return true, nil
	}
	exists := func() (ok bool, err error) {
		err = s.retry(ctx, func() (err error) {
			ok, err = s.c.Schema().TenantsExists().WithClassName(s.class).WithTenant(t).Do(ctx)
			return err
		})
		return ok, err
	}
	ok, err := exists()
	if err != nil {
		return false, fmt.Errorf("check tenant %s: %w", t, err)
	}
	if !ok && create {
		err := s.retry(ctx, func() error {
			return s.c.Schema().TenantsCreator().WithClassName(s.class).
				WithTenants(models.Tenant{Name: t, ActivityStatus: models.TenantActivityStatusHOT}).Do(ctx)
		})
		if err != nil {
			// Another process may have created it meanwhile.
			if ok2, _ := exists(); !ok2 {
				return false, fmt.Errorf("create tenant %s: %w", t, err)
			}
		}
		ok = true
	}
	if ok {
		s.tenants.add(t)
	}
	return ok, nil
}

func notFound(err error) bool {
	var we *fault.WeaviateClientError
	return errors.As(err, &we) && we.StatusCode == 404
}

// tenantSet is the tenants this process knows exist, so that a write
// creates a tenant once. It is safe for concurrent use.
type tenantSet struct {
	mu    sync.Mutex
	known map[string]bool
}

func (t *tenantSet) has(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.known[name]
}

func (t *tenantSet) add(name string) {
	t.mu.Lock()
	t.known[name] = true
	t.mu.Unlock()
}

// reset forgets every tenant (the collection was rebuilt).
func (t *tenantSet) reset() {
	t.mu.Lock()
	clear(t.known)
	t.mu.Unlock()
}
