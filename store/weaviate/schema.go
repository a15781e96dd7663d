package weaviate

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	"github.com/weaviate/weaviate/entities/models"
)

func ptr[T any](v T) *T { return &v }

// properties is the collection layout of SchemaVersion.
func properties() []*models.Property {
	keyword := func(name string) *models.Property {
		return &models.Property{Name: name, DataType: []string{"text"}, Tokenization: models.PropertyTokenizationField,
			IndexFilterable: ptr(true), IndexSearchable: ptr(false)}
	}
	return []*models.Property{
		{Name: "doc", DataType: []string{"text"}, Description: "the experience as JSON",
			IndexFilterable: ptr(false), IndexSearchable: ptr(false)},
		{Name: "terms", DataType: []string{"text"}, Description: "Hindsight's tokenisation of the text, for BM25",
			Tokenization: models.PropertyTokenizationWhitespace, IndexFilterable: ptr(false), IndexSearchable: ptr(true)},
		keyword("hid"), keyword("namespace"), keyword("writer"), keyword("base"), keyword("server"), keyword("tool"), keyword("taskType"), keyword("errorCode"),
		{Name: "superseded", DataType: []string{"boolean"}, IndexFilterable: ptr(true)},
		{Name: "deleted", DataType: []string{"boolean"}, IndexFilterable: ptr(true)},
		{Name: "lastActive", DataType: []string{"int"}, IndexFilterable: ptr(true), IndexRangeFilters: ptr(true)},
		{Name: "created", DataType: []string{"int"}, IndexFilterable: ptr(true)},
		{Name: "version", DataType: []string{"int"}, IndexFilterable: ptr(false)},
		keyword("epoch"),
		{Name: "basedoc", DataType: []string{"text"}, Description: "the base the deltas apply to, as JSON",
			IndexFilterable: ptr(false), IndexSearchable: ptr(false)},
	}
}

var descRE = regexp.MustCompile(`hindsight schema v(\d+); embedder (\S+)`)

func (s *Store) description() string {
	return fmt.Sprintf("hindsight schema v%d; embedder %s", SchemaVersion, s.embID)
}

// migrate creates the collection, or brings an older one up to
// SchemaVersion by adding the properties it lacks.
func (s *Store) migrate(ctx context.Context) error {
	var ok bool
	err := s.retry(ctx, func() (err error) {
		ok, err = s.c.Schema().ClassExistenceChecker().WithClassName(s.class).Do(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("check collection %s: %w", s.class, err)
	}
	if !ok {
		factor := max(s.repl.factor, 1)
		class := &models.Class{
			Class:              s.class,
			Description:        s.description(),
			Properties:         properties(),
			Vectorizer:         "none",
			VectorIndexType:    "hnsw",
			VectorIndexConfig:  map[string]any{"distance": "cosine"},
			MultiTenancyConfig: &models.MultiTenancyConfig{Enabled: true, AutoTenantCreation: true, AutoTenantActivation: true},
			ReplicationConfig:  &models.ReplicationConfig{Factor: int64(factor), AsyncEnabled: factor > 1},
		}
		if err := s.c.Schema().ClassCreator().WithClass(class).Do(ctx); err != nil {
			// Another process may have created it meanwhile.
			if ok, err2 := s.c.Schema().ClassExistenceChecker().WithClassName(s.class).Do(ctx); err2 != nil || !ok {
				return fmt.Errorf("create collection %s: %w", s.class, err)
			}
		} else {
			if err := s.setFactor(factor); err != nil {
				return err
			}
			return s.migrateDeltas(ctx)
		}
	}
	var class *models.Class
	err = s.retry(ctx, func() (err error) {
		class, err = s.c.Schema().ClassGetter().WithClassName(s.class).Do(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("read collection %s: %w", s.class, err)
	}
	m := descRE.FindStringSubmatch(class.Description)
	if m == nil {
		return fmt.Errorf("collection %s exists but was not made by Hindsight (description %q)", s.class, class.Description)
	}
	have := int64(1)
	if class.ReplicationConfig != nil && class.ReplicationConfig.Factor > 0 {
		have = class.ReplicationConfig.Factor
	}
	if s.repl.factor > 0 && int64(s.repl.factor) != have {
		return fmt.Errorf("collection %s is replicated %d times, the configuration says %d: "+
			"set store.weaviate.replication_factor (or HINDSIGHT_WEAVIATE_REPLICATION) to %d, "+
			"or export the experiences (hindsight experiences export), drop the collection and import them with the new factor",
			s.class, have, s.repl.factor, have)
	}
	if err := s.setFactor(int(have)); err != nil {
		return err
	}
	version, _ := strconv.Atoi(m[1])
	if version > SchemaVersion {
		return fmt.Errorf("collection %s has schema v%d, newer than this Hindsight (v%d)", s.class, version, SchemaVersion)
	}
	if m[2] != s.embID {
		s.stale = true
		s.log.Warn("weaviate collection holds vectors of another embedder; searches are lexical until re-embedded",
			"collection", s.class, "stored", m[2], "configured", s.embID)
	}
	hasProp := map[string]bool{}
	for _, p := range class.Properties {
		hasProp[p.Name] = true
	}
	for _, p := range properties() {
		if hasProp[p.Name] {
			continue
		}
		if err := s.c.Schema().PropertyCreator().WithClassName(s.class).WithProperty(p).Do(ctx); err != nil {
			return fmt.Errorf("migrate collection %s: add %s: %w", s.class, p.Name, err)
		}
	}
	if version < SchemaVersion && !s.stale {
		// Re-read: the class update must carry the properties just added.
		class, err = s.c.Schema().ClassGetter().WithClassName(s.class).Do(ctx)
		if err != nil {
			return fmt.Errorf("migrate collection %s: %w", s.class, err)
		}
		class.Description = s.description()
		if err := s.c.Schema().ClassUpdater().WithClass(class).Do(ctx); err != nil {
			return fmt.Errorf("migrate collection %s: %w", s.class, err)
		}
	}
	return s.migrateDeltas(ctx)
}
