// Package weaviate is the experience store backend for a Weaviate cluster,
// for when one machine is not enough or a team shares experience.
//
// Hindsight creates and migrates its own collection (Config.Class,
// "HindsightExperience" by default; the schema version and the embedder are
// recorded in the collection's description). Vectors are supplied by
// Hindsight's embedder (no Weaviate vectorizer module). The collection is
// multi-tenant with one tenant per namespace, created on first write, so a
// query in one namespace cannot return another's experiences.
//
// Search is one Weaviate hybrid query (BM25 and vector, ranked fusion
// weighted as store/rank weighs the arms for the embedder, see
// rank.VectorWeightFor) with where-filters for server, tool, task type,
// error code and state. The BM25
// side runs over a "terms" property holding Hindsight's own tokenisation
// (store/tokenize: CJK bigrams, split identifiers), so lexical matching
// behaves as in the embedded store. The BM25 and vector ranks are read back
// from Weaviate's score explanation and re-ranked with store/rank, so both
// backends score alike.
//
// Optimistic versioning (ErrConflict) is enforced within one process (the
// daemon is a single instance); Weaviate itself has no compare-and-set.
package weaviate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-openapi/strfmt"
	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/hindsight-proxy/hindsight/store/tokenize"
	wv "github.com/weaviate/weaviate-go-client/v5/weaviate"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/fault"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/filters"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/graphql"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/grpc"
	"github.com/weaviate/weaviate/entities/models"
)

// SchemaVersion is the version of the collection layout this package
// writes. Open migrates older collections up to it (adding properties).
const SchemaVersion = 1

// DefaultClass is the collection name used when Config.Class is empty.
const DefaultClass = "HindsightExperience"

// Config locates the Weaviate cluster.
type Config struct {
	URL     string // REST address, e.g. http://127.0.0.1:8080 (HINDSIGHT_WEAVIATE_URL)
	GRPC    string // gRPC host:port, e.g. 127.0.0.1:50051 (HINDSIGHT_WEAVIATE_GRPC); optional
	APIKey  string // optional bearer key
	Class   string // collection name; DefaultClass when empty
	Timeout time.Duration
	Rank    rank.Options
	Logger  *slog.Logger
	// Now returns the current time for ranking and the cold index (tests
	// and benchmarks); nil means time.Now.
	Now func() time.Time
}

// Store is the Weaviate experience store. It is safe for concurrent use.
type Store struct {
	c     *wv.Client
	class string
	opt   rank.Options
	log   *slog.Logger
	emb   hindsight.Embedder
	embID string
	// stale is set when the collection holds vectors of another embedder:
	// searches are lexical and writes refused until Reembed.
	stale bool
	now   func() time.Time

	mu      sync.Mutex // serialises writes (version checks)
	tmu     sync.Mutex
	tenants map[string]bool
}

var _ hindsight.ExperienceStore = (*Store)(nil)
var _ store.Reembedder = (*Store)(nil)

// Open connects to Weaviate, creates or migrates the collection and
// returns the store.
func Open(ctx context.Context, cfg Config, emb hindsight.Embedder) (*Store, error) {
	if emb == nil || emb.Dim() <= 0 {
		return nil, errors.New("open weaviate store: an embedder with a positive dimension is required")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("open weaviate store: bad URL %q", cfg.URL)
	}
	wc := wv.Config{Host: u.Host, Scheme: u.Scheme, Timeout: cfg.Timeout}
	if cfg.GRPC != "" {
		wc.GrpcConfig = &grpc.Config{Host: cfg.GRPC, Secured: u.Scheme == "https"}
	}
	if cfg.APIKey != "" {
		wc.Headers = map[string]string{"Authorization": "Bearer " + cfg.APIKey}
	}
	c, err := wv.NewClient(wc)
	if err != nil {
		return nil, fmt.Errorf("open weaviate store: %w", err)
	}
	s := &Store{c: c, class: cfg.Class, opt: cfg.Rank, log: cfg.Logger, emb: emb, embID: store.EmbedderID(emb), tenants: map[string]bool{}}
	if s.class == "" {
		s.class = DefaultClass
	}
	s.now = cfg.Now
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("open weaviate store: %w", err)
	}
	return s, nil
}

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
		keyword("hid"), keyword("namespace"), keyword("server"), keyword("tool"), keyword("taskType"), keyword("errorCode"),
		{Name: "superseded", DataType: []string{"boolean"}, IndexFilterable: ptr(true)},
		{Name: "deleted", DataType: []string{"boolean"}, IndexFilterable: ptr(true)},
		{Name: "lastActive", DataType: []string{"int"}, IndexFilterable: ptr(true), IndexRangeFilters: ptr(true)},
		{Name: "created", DataType: []string{"int"}, IndexFilterable: ptr(true)},
	}
}

var descRE = regexp.MustCompile(`hindsight schema v(\d+); embedder (\S+)`)

func (s *Store) description() string {
	return fmt.Sprintf("hindsight schema v%d; embedder %s", SchemaVersion, s.embID)
}

// migrate creates the collection, or brings an older one up to
// SchemaVersion by adding the properties it lacks.
func (s *Store) migrate(ctx context.Context) error {
	ok, err := s.c.Schema().ClassExistenceChecker().WithClassName(s.class).Do(ctx)
	if err != nil {
		return fmt.Errorf("check collection %s: %w", s.class, err)
	}
	if !ok {
		class := &models.Class{
			Class:              s.class,
			Description:        s.description(),
			Properties:         properties(),
			Vectorizer:         "none",
			VectorIndexType:    "hnsw",
			VectorIndexConfig:  map[string]any{"distance": "cosine"},
			MultiTenancyConfig: &models.MultiTenancyConfig{Enabled: true, AutoTenantCreation: true, AutoTenantActivation: true},
		}
		if err := s.c.Schema().ClassCreator().WithClass(class).Do(ctx); err != nil {
			// Another process may have created it meanwhile.
			if ok, err2 := s.c.Schema().ClassExistenceChecker().WithClassName(s.class).Do(ctx); err2 != nil || !ok {
				return fmt.Errorf("create collection %s: %w", s.class, err)
			}
		} else {
			return nil
		}
	}
	class, err := s.c.Schema().ClassGetter().WithClassName(s.class).Do(ctx)
	if err != nil {
		return fmt.Errorf("read collection %s: %w", s.class, err)
	}
	m := descRE.FindStringSubmatch(class.Description)
	if m == nil {
		return fmt.Errorf("collection %s exists but was not made by Hindsight (description %q)", s.class, class.Description)
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
	have := map[string]bool{}
	for _, p := range class.Properties {
		have[p.Name] = true
	}
	for _, p := range properties() {
		if have[p.Name] {
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
	return nil
}

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
	s.tmu.Lock()
	known := s.tenants[t]
	s.tmu.Unlock()
	if known {
		return true, nil
	}
	ok, err := s.c.Schema().TenantsExists().WithClassName(s.class).WithTenant(t).Do(ctx)
	if err != nil {
		return false, fmt.Errorf("check tenant %s: %w", t, err)
	}
	if !ok && create {
		err := s.c.Schema().TenantsCreator().WithClassName(s.class).
			WithTenants(models.Tenant{Name: t, ActivityStatus: models.TenantActivityStatusHOT}).Do(ctx)
		if err != nil {
			if ok2, _ := s.c.Schema().TenantsExists().WithClassName(s.class).WithTenant(t).Do(ctx); !ok2 {
				return false, fmt.Errorf("create tenant %s: %w", t, err)
			}
		}
		ok = true
	}
	if ok {
		s.tmu.Lock()
		s.tenants[t] = true
		s.tmu.Unlock()
	}
	return ok, nil
}

func notFound(err error) bool {
	var we *fault.WeaviateClientError
	return errors.As(err, &we) && we.StatusCode == 404
}

// get reads one object; nil without error when it does not exist.
func (s *Store) get(ctx context.Context, ns, id string) (*hindsight.Experience, error) {
	ok, err := s.hasTenant(ctx, ns, false)
	if err != nil || !ok {
		return nil, err
	}
	objs, err := s.c.Data().ObjectsGetter().WithClassName(s.class).WithID(objectID(ns, id)).
		WithTenant(Tenant(ns)).WithVector().Do(ctx)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, nil
	}
	e, err := decode(objs[0].Properties)
	if err != nil {
		return nil, err
	}
	e.Vector = objs[0].Vector
	return e, nil
}

func decode(props any) (*hindsight.Experience, error) {
	m, ok := props.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("unexpected properties %T", props)
	}
	doc, _ := m["doc"].(string)
	e := new(hindsight.Experience)
	if err := json.Unmarshal([]byte(doc), e); err != nil {
		return nil, fmt.Errorf("decode experience: %w", err)
	}
	return e, nil
}

func encode(e *hindsight.Experience) (map[string]any, error) {
	doc, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"doc": string(doc), "terms": strings.Join(tokenize.IndexTerms(nil, store.Text(e)), " "),
		"hid": e.ID, "namespace": e.Namespace, "server": e.Server, "tool": e.Tool,
		"taskType": e.TaskType, "errorCode": e.ErrorCode,
		"superseded": e.SupersededBy != "", "deleted": e.Deleted,
		"lastActive": rank.LastActive(e).Unix(), "created": e.CreatedAt.UnixNano(),
	}, nil
}

// Get returns an experience in any state, with its vector.
func (s *Store) Get(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	e, err := s.get(ctx, rank.Namespace(namespace), id)
	if err != nil {
		return nil, fmt.Errorf("get experience %q: %w", id, err)
	}
	if e == nil {
		return nil, fmt.Errorf("get experience %q: %w", id, hindsight.ErrNotFound)
	}
	return e, nil
}

// Put inserts or updates e (see hindsight.ExperienceStore and the embedded
// store, whose rules it follows).
func (s *Store) Put(ctx context.Context, e *hindsight.Experience) error {
	if e.Namespace == "" {
		e.Namespace = hindsight.DefaultNamespace
	}
	if e.ID == "" {
		e.ID = uuid.NewString()
	}
	if err := store.Validate(e); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	if s.stale {
		return fmt.Errorf("put experience %q: collection holds another embedder's vectors; re-embed first: %w", e.ID, store.ErrDimension)
	}
	if len(e.Vector) > 0 && ((e.Embedder != "" && e.Embedder != s.embID) || len(e.Vector) != s.emb.Dim()) {
		return fmt.Errorf("put experience %q: vector of %q with %d dimensions, store uses %s: %w",
			e.ID, e.Embedder, len(e.Vector), s.embID, store.ErrDimension)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.hasTenant(ctx, e.Namespace, true); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	old, err := s.get(ctx, e.Namespace, e.ID)
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	now := s.now().UTC()
	n := *e
	n.SourceSteps = slices.Clone(e.SourceSteps)
	if old != nil {
		if old.Version != e.Version {
			return fmt.Errorf("put experience %q: stored version %d, given %d: %w", e.ID, old.Version, e.Version, hindsight.ErrConflict)
		}
		if n.CreatedAt.IsZero() {
			n.CreatedAt = old.CreatedAt
		}
	} else if n.CreatedAt.IsZero() {
		n.CreatedAt = now
	}
	vec := e.Vector
	if len(vec) == 0 && old != nil && len(old.Vector) == s.emb.Dim() && old.Embedder == s.embID && store.Text(old) == store.Text(e) {
		vec = old.Vector
	}
	if len(vec) == 0 {
		vs, err := s.emb.Embed(ctx, []string{store.Text(e)})
		if err != nil {
			return fmt.Errorf("put experience %q: embed: %w", e.ID, err)
		}
		if len(vs) != 1 || len(vs[0]) != s.emb.Dim() {
			return fmt.Errorf("put experience %q: embedder returned a bad vector: %w", e.ID, store.ErrDimension)
		}
		vec = vs[0]
	}
	n.Version = e.Version + 1
	n.UpdatedAt = now
	n.Embedder = s.embID
	props, err := encode(&n)
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	oid := objectID(n.Namespace, n.ID)
	if old == nil {
		_, err = s.c.Data().Creator().WithClassName(s.class).WithID(oid).WithTenant(Tenant(n.Namespace)).
			WithProperties(props).WithVector(vec).Do(ctx)
	} else {
		err = s.c.Data().Updater().WithClassName(s.class).WithID(oid).WithTenant(Tenant(n.Namespace)).
			WithProperties(props).WithVector(vec).Do(ctx)
	}
	if err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	e.Version, e.CreatedAt, e.UpdatedAt, e.Embedder = n.Version, n.CreatedAt, n.UpdatedAt, n.Embedder
	e.Vector = slices.Clone(vec)
	return nil
}

// RecordHits adds a hit at at to each of ids in namespace.
func (s *Store) RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error {
	ns := rank.Namespace(namespace)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		e, err := s.get(ctx, ns, id)
		if err != nil {
			return fmt.Errorf("record experience hits: %w", err)
		}
		if e == nil {
			continue
		}
		e.HitCount++
		t := at.UTC()
		if e.LastHitAt == nil || t.After(*e.LastHitAt) {
			e.LastHitAt = &t
		}
		vec := e.Vector
		e.Vector = nil
		props, err := encode(e)
		if err != nil {
			return fmt.Errorf("record experience hits: %w", err)
		}
		err = s.c.Data().Updater().WithClassName(s.class).WithID(objectID(ns, id)).WithTenant(Tenant(ns)).
			WithProperties(props).WithVector(vec).Do(ctx)
		if err != nil {
			return fmt.Errorf("record experience hits: %w", err)
		}
	}
	return nil
}

// where builds the query's filter (nil when nothing is filtered).
func (s *Store) where(q *hindsight.Query, now time.Time) *filters.WhereBuilder {
	var ops []*filters.WhereBuilder
	eq := func(path, v string) {
		if v != "" {
			ops = append(ops, filters.Where().WithPath([]string{path}).WithOperator(filters.Equal).WithValueText(v))
		}
	}
	eq("server", q.Server)
	eq("tool", q.Tool)
	eq("taskType", q.TaskType)
	eq("errorCode", q.ErrorCode)
	if !q.IncludeSuperseded {
		ops = append(ops, filters.Where().WithPath([]string{"superseded"}).WithOperator(filters.Equal).WithValueBoolean(false))
	}
	if !q.IncludeDeleted {
		ops = append(ops, filters.Where().WithPath([]string{"deleted"}).WithOperator(filters.Equal).WithValueBoolean(false))
	}
	if !q.IncludeCold {
		ca := s.opt.ColdAfter
		if ca <= 0 {
			ca = rank.DefaultColdAfter
		}
		ops = append(ops, filters.Where().WithPath([]string{"lastActive"}).WithOperator(filters.GreaterThan).
			WithValueInt(now.Add(-ca).Unix()))
	}
	switch len(ops) {
	case 0:
		return nil
	case 1:
		return ops[0]
	}
	return filters.Where().WithOperator(filters.And).WithOperands(ops)
}

// Search runs one hybrid query in q's namespace's tenant and ranks the
// result with store/rank; hits are recorded unless q.NoHit. Results carry
// no vectors (fetching 100 of them costs more than the query); Get has them.
func (s *Store) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	ns := rank.Namespace(q.Namespace)
	ok, err := s.hasTenant(ctx, ns, false)
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
	}
	if !ok {
		return nil, nil
	}
	now := s.now()
	// Weaviate's ranked fusion weighs its keyword and vector sets 1−α and
	// α: the same proportions as store/rank's arms, so that the 100
	// candidates it keeps are the ones rank would rank best.
	opt := s.opt.ForEmbedder(s.emb.Name())
	bw, vw := opt.ArmWeights()
	alpha := float32(vw / (bw + vw))
	get := s.c.GraphQL().Get().WithClassName(s.class).WithTenant(Tenant(ns)).WithLimit(rank.Candidates).
		WithFields(graphql.Field{Name: "doc"}, graphql.Field{Name: "_additional", Fields: []graphql.Field{
			{Name: "id"}, {Name: "explainScore"}}})
	if w := s.where(&q, now); w != nil {
		get = get.WithWhere(w)
	}
	text := strings.TrimSpace(q.Text)
	if text != "" {
		terms := strings.Join(tokenize.IndexTerms(nil, text), " ")
		if terms == "" {
			terms = text
		}
		h := s.c.GraphQL().HybridArgumentBuilder().WithQuery(terms).WithProperties([]string{"terms"}).
			WithFusionType(graphql.Ranked)
		if s.stale {
			alpha = 0
		} else {
			vs, err := s.emb.Embed(ctx, []string{text})
			if err != nil {
				return nil, fmt.Errorf("search experiences: embed query: %w", err)
			}
			h = h.WithVector(vs[0])
		}
		get = get.WithHybrid(h.WithAlpha(alpha))
	} else {
		get = get.WithSort(graphql.Sort{Path: []string{"created"}, Order: graphql.Desc})
	}
	resp, err := get.Do(ctx)
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
	}
	if len(resp.Errors) > 0 {
		return nil, fmt.Errorf("search experiences: %s", resp.Errors[0].Message)
	}
	cands, err := s.candidates(resp, &q, text != "", alpha, now)
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
	}
	res := opt.Fuse(&q, cands, now)
	if !q.NoHit && len(res) > 0 {
		ids := make([]string, len(res))
		for i := range res {
			ids[i] = res[i].ID
		}
		if err := s.RecordHits(ctx, ns, ids, now); err != nil {
			s.log.Warn("record experience hits", "err", err)
		}
	}
	return res, nil
}

type hit struct {
	Doc        string `json:"doc"`
	Additional struct {
		ID           string    `json:"id"`
		Vector       []float32 `json:"vector"`
		ExplainScore string    `json:"explainScore"`
	} `json:"_additional"`
}

// candidates decodes a Get response and recovers each result's BM25 and
// vector rank from the explanation of a hybrid query run with alpha.
func (s *Store) candidates(resp *models.GraphQLResponse, q *hindsight.Query, hybrid bool, alpha float32, now time.Time) ([]rank.Candidate, error) {
	get, _ := resp.Data["Get"].(map[string]any)
	raw, err := json.Marshal(get[s.class])
	if err != nil {
		return nil, err
	}
	var hits []hit
	if err := json.Unmarshal(raw, &hits); err != nil {
		return nil, fmt.Errorf("decode results: %w", err)
	}
	var out []rank.Candidate
	for i, h := range hits {
		e := new(hindsight.Experience)
		if err := json.Unmarshal([]byte(h.Doc), e); err != nil {
			return nil, fmt.Errorf("decode experience: %w", err)
		}
		e.Vector = h.Additional.Vector
		if !s.opt.Match(q, e, now) {
			continue
		}
		c := rank.Candidate{Exp: e}
		if hybrid {
			c.BM25Rank, c.VectorRank = ranks(h.Additional.ExplainScore, alpha)
		} else {
			c.BM25Rank = i + 1
		}
		if c.BM25Rank > 0 || c.VectorRank > 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

var contribRE = regexp.MustCompile(`Result Set (\w+)[^\n]*?contributed ([0-9.eE+-]+) to the score`)

// ranks reads the 1-based keyword and vector ranks from Weaviate's ranked
// fusion explanation of a hybrid query run with alpha: result i (0-based)
// of a set weighted w contributes w/(i+60), where the keyword set weighs
// 1−alpha and the vector set alpha.
func ranks(explain string, alpha float32) (bm25, vector int) {
	a := float64(alpha)
	for _, m := range contribRE.FindAllStringSubmatch(explain, -1) {
		var w float64
		switch {
		case strings.HasPrefix(m[1], "keyword"), strings.HasPrefix(m[1], "bm25"):
			w = 1 - a
		case strings.HasPrefix(m[1], "vector"):
			w = a
		default:
			continue
		}
		c, err := strconv.ParseFloat(m[2], 64)
		if err != nil || !(c > 0) || !(w > 0) || w/c > 1e6 {
			continue
		}
		r := max(int(math.Round(w/c))-60+1, 1)
		if strings.HasPrefix(m[1], "vector") {
			vector = r
		} else {
			bm25 = r
		}
	}
	return bm25, vector
}

// List returns experiences in creation order (then namespace and id).
func (s *Store) List(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	var tenants []string
	if opt.Namespace != "" {
		ok, err := s.hasTenant(ctx, opt.Namespace, false)
		if err != nil {
			return nil, fmt.Errorf("list experiences: %w", err)
		}
		if ok {
			tenants = []string{Tenant(opt.Namespace)}
		}
	} else {
		ts, err := s.c.Schema().TenantsGetter().WithClassName(s.class).Do(ctx)
		if err != nil {
			return nil, fmt.Errorf("list experiences: %w", err)
		}
		for _, t := range ts {
			tenants = append(tenants, t.Name)
		}
	}
	var out []hindsight.Experience
	for _, t := range tenants {
		after := ""
		for {
			g := s.c.Data().ObjectsGetter().WithClassName(s.class).WithTenant(t).WithLimit(500)
			if after != "" {
				g = g.WithAfter(after)
			}
			objs, err := g.Do(ctx)
			if err != nil {
				return nil, fmt.Errorf("list experiences: %w", err)
			}
			for _, o := range objs {
				e, err := decode(o.Properties)
				if err != nil {
					return nil, fmt.Errorf("list experiences: %w", err)
				}
				switch {
				case opt.Namespace != "" && e.Namespace != opt.Namespace,
					opt.Server != "" && e.Server != opt.Server,
					opt.Tool != "" && e.Tool != opt.Tool,
					e.SupersededBy != "" && !opt.IncludeSuperseded,
					e.Deleted && !opt.IncludeDeleted:
					continue
				}
				out = append(out, *e)
			}
			if len(objs) < 500 {
				break
			}
			after = string(objs[len(objs)-1].ID)
		}
	}
	return store.ListOrder(out, opt.Limit), nil
}

// Close releases the client's connections.
func (s *Store) Close() error { return nil }

// Import writes experiences in batches of 100 (one request each) for
// loading packs and benchmarks. Each is written as given — id (generated
// when empty), version (1 when 0), timestamps (now when zero) — replacing
// any stored experience with the same id without a version check; missing
// vectors are embedded in batches.
func (s *Store) Import(ctx context.Context, exps []*hindsight.Experience) error {
	if s.stale {
		return fmt.Errorf("import experiences: collection holds another embedder's vectors; re-embed first: %w", store.ErrDimension)
	}
	const batch = 100
	now := s.now().UTC()
	for i := 0; i < len(exps); i += batch {
		part := exps[i:min(i+batch, len(exps))]
		var texts []string
		var need []int
		for j, e := range part {
			if e.Namespace == "" {
				e.Namespace = hindsight.DefaultNamespace
			}
			if e.ID == "" {
				e.ID = uuid.NewString()
			}
			if err := store.Validate(e); err != nil {
				return fmt.Errorf("import experience %q: %w", e.ID, err)
			}
			if len(e.Vector) > 0 && (len(e.Vector) != s.emb.Dim() || (e.Embedder != "" && e.Embedder != s.embID)) {
				return fmt.Errorf("import experience %q: %w", e.ID, store.ErrDimension)
			}
			if len(e.Vector) == 0 {
				texts = append(texts, store.Text(e))
				need = append(need, j)
			}
			if _, err := s.hasTenant(ctx, e.Namespace, true); err != nil {
				return fmt.Errorf("import experiences: %w", err)
			}
		}
		if len(texts) > 0 {
			vs, err := s.emb.Embed(ctx, texts)
			if err != nil {
				return fmt.Errorf("import experiences: embed: %w", err)
			}
			for k, j := range need {
				part[j].Vector = vs[k]
			}
		}
		objs := make([]*models.Object, len(part))
		for j, e := range part {
			if e.Version == 0 {
				e.Version = 1
			}
			if e.CreatedAt.IsZero() {
				e.CreatedAt = now
			}
			if e.UpdatedAt.IsZero() {
				e.UpdatedAt = now
			}
			e.Embedder = s.embID
			props, err := encode(e)
			if err != nil {
				return fmt.Errorf("import experience %q: %w", e.ID, err)
			}
			objs[j] = &models.Object{Class: s.class, ID: strfmt.UUID(objectID(e.Namespace, e.ID)),
				Tenant: Tenant(e.Namespace), Properties: props, Vector: e.Vector}
		}
		res, err := s.c.Batch().ObjectsBatcher().WithObjects(objs...).Do(ctx)
		if err != nil {
			return fmt.Errorf("import experiences: %w", err)
		}
		for _, r := range res {
			if r.Result != nil && r.Result.Errors != nil && len(r.Result.Errors.Error) > 0 {
				return fmt.Errorf("import experiences: object %s: %s", r.ID, r.Result.Errors.Error[0].Message)
			}
		}
	}
	return nil
}

// NeedsReembed returns how many experiences hold vectors of another
// embedder than the configured one (all of them, or none: a collection
// has one embedder).
func (s *Store) NeedsReembed() int {
	if !s.stale {
		return 0
	}
	all, err := s.List(context.Background(), hindsight.ListOptions{IncludeSuperseded: true, IncludeDeleted: true})
	if err != nil {
		return 1
	}
	return len(all)
}

// Reembed rebuilds the collection with emb's vectors: it reads every
// experience, embeds them (progress is called after each batch), drops the
// collection, creates it again for emb and writes them back. A Weaviate
// collection's vector dimension cannot change in place. Meanwhile a copy
// of every experience is kept in a 0600 JSONL file in the temporary
// directory (logged); it is removed on success and names the way back
// (hindsight experiences import) if the process dies half way.
func (s *Store) Reembed(ctx context.Context, emb hindsight.Embedder, progress func(done, total int)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	all, err := s.List(ctx, hindsight.ListOptions{IncludeSuperseded: true, IncludeDeleted: true})
	if err != nil {
		return fmt.Errorf("re-embed experiences: %w", err)
	}
	backup, err := os.CreateTemp("", "hindsight-reembed-*.jsonl")
	if err != nil {
		return fmt.Errorf("re-embed experiences: backup: %w", err)
	}
	enc := json.NewEncoder(backup)
	for i := range all {
		if err := enc.Encode(&all[i]); err != nil {
			backup.Close()
			return fmt.Errorf("re-embed experiences: backup: %w", err)
		}
	}
	if err := backup.Close(); err != nil {
		return fmt.Errorf("re-embed experiences: backup: %w", err)
	}
	s.log.Info("re-embedding weaviate collection; a copy of every experience is kept until done",
		"collection", s.class, "count", len(all), "backup", backup.Name())
	ptrs := make([]*hindsight.Experience, len(all))
	newID := store.EmbedderID(emb)
	const batch = 64
	for i := 0; i < len(all); i += batch {
		part := all[i:min(i+batch, len(all))]
		texts := make([]string, len(part))
		for j := range part {
			texts[j] = store.Text(&part[j])
		}
		vs, err := emb.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("re-embed experiences: %w", err)
		}
		for j := range part {
			if len(vs[j]) != emb.Dim() {
				return fmt.Errorf("re-embed experiences: %w", store.ErrDimension)
			}
			part[j].Vector, part[j].Embedder = vs[j], newID
			ptrs[i+j] = &part[j]
		}
		if progress != nil {
			progress(i+len(part), len(all))
		}
	}
	if err := s.c.Schema().ClassDeleter().WithClassName(s.class).Do(ctx); err != nil {
		return fmt.Errorf("re-embed experiences: drop collection: %w", err)
	}
	s.emb, s.embID, s.stale = emb, store.EmbedderID(emb), false
	s.tmu.Lock()
	clear(s.tenants)
	s.tmu.Unlock()
	if err := s.migrate(ctx); err != nil {
		return fmt.Errorf("re-embed experiences (backup in %s): %w", backup.Name(), err)
	}
	if err := s.Import(ctx, ptrs); err != nil {
		return fmt.Errorf("re-embed experiences (backup in %s): %w", backup.Name(), err)
	}
	os.Remove(backup.Name())
	return nil
}
