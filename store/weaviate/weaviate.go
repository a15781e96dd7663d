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
// Replication: Config.ReplicationFactor copies of every tenant's shard
// (set when the collection is created, checked when it exists), with reads
// and writes at QUORUM when it is above 1 (Config.Consistency), and
// asynchronous replication on so that a node that was down catches up.
// Errors a cluster recovers from by itself (a new tenant's shard not yet on
// the node asked, a node that just left, a leader election) are retried
// with backoff for up to Config.RetryFor; every write is an upsert by id, so
// a retry is idempotent. A Weaviate that does not answer at all (its
// readiness probe neither) is not retried: a circuit breaker fails every
// call at once with hindsight.ErrStoreUnavailable until a probe, at most
// one a second, finds it ready (see breaker.go).
//
// Optimistic versioning (ErrConflict) holds for a caller that writes a
// version it did not read, and no update is lost across processes, e.g.
// several daemons sharing a namespace, though Weaviate has no
// compare-and-set: an update is stored as its own delta object that no
// other write replaces, and an experience is folded from its base and its
// deltas, found at the consistency level's replicas (see delta.go and
// fold.go). Two updates at the same moment are both kept.
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
	"strconv"
	"strings"
	"sync"
	"time"

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
const SchemaVersion = 3

// DefaultClass is the collection name used when Config.Class is empty.
const DefaultClass = "HindsightExperience"

// Config locates the Weaviate cluster.
type Config struct {
	URL     string        // REST address, e.g. http://127.0.0.1:8080 (HINDSIGHT_WEAVIATE_URL)
	GRPC    string        // gRPC host:port, e.g. 127.0.0.1:50051 (HINDSIGHT_WEAVIATE_GRPC); optional
	APIKey  string        // optional bearer key
	Class   string        // collection name; DefaultClass when empty
	Timeout time.Duration // one request's; 0 means DefaultTimeout
	Rank    rank.Options
	Logger  *slog.Logger
	// Now returns the current time for ranking and the cold index (tests
	// and benchmarks); nil means time.Now.
	Now func() time.Time
	// ReplicationFactor is the number of copies of each namespace's
	// shard (HINDSIGHT_WEAVIATE_REPLICATION), at most the number of nodes.
	// It is set when Open creates the collection; an existing collection
	// with another factor is an error that names the fix. 0 means 1 for a
	// new collection and whatever an existing one has.
	ReplicationFactor int
	// Consistency is the level of reads and writes when the factor is
	// above 1: ONE, QUORUM (the default) or ALL.
	Consistency string
	// RetryFor bounds the retry of one operation's transient cluster
	// errors; 0 means DefaultRetryFor, negative means no retry.
	RetryFor time.Duration
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

	mu      sync.Mutex // serialises this process's writes (version checks)
	tmu     sync.Mutex
	tenants map[string]bool

	instance string          // this store's id in its hit counters' object ids
	hitc     map[string]hits // this instance's hit counters, by object id
	dmu      sync.Mutex
	deltas   map[string]delta // deltas read, by object id (they never change)

	factor   int    // replication factor wanted (0: any) and, after migrate, in force
	cl       string // consistency level, "" for Weaviate's default
	clWant   string
	retryFor time.Duration
	brk      breaker // fails calls at once while Weaviate is known to be down
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
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
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
	s := &Store{c: c, class: cfg.Class, opt: cfg.Rank, log: cfg.Logger, emb: emb, embID: store.EmbedderID(emb), tenants: map[string]bool{},
		instance: uuid.NewString(), hitc: map[string]hits{}, deltas: map[string]delta{},
		factor: cfg.ReplicationFactor, clWant: cfg.Consistency, retryFor: cfg.RetryFor}
	if s.factor < 0 {
		return nil, fmt.Errorf("open weaviate store: replication factor %d", s.factor)
	}
	if _, err := consistency(s.clWant, 1); err != nil {
		return nil, fmt.Errorf("open weaviate store: %w", err)
	}
	switch {
	case s.retryFor == 0:
		s.retryFor = DefaultRetryFor
	case s.retryFor < 0:
		s.retryFor = time.Nanosecond
	}
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
	s.brk = breaker{probe: s.probeReady, now: time.Now, every: probeEvery}
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
		factor := max(s.factor, 1)
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
	if s.factor > 0 && int64(s.factor) != have {
		return fmt.Errorf("collection %s is replicated %d times, the configuration says %d: "+
			"set store.weaviate.replication_factor (or HINDSIGHT_WEAVIATE_REPLICATION) to %d, "+
			"or export the experiences (hindsight experiences export), drop the collection and import them with the new factor",
			s.class, have, s.factor, have)
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

// setFactor records the factor in force and the consistency level that
// follows.
func (s *Store) setFactor(factor int) error {
	cl, err := consistency(s.clWant, factor)
	if err != nil {
		return err
	}
	s.factor, s.cl = factor, cl
	return nil
}

// Replication returns the collection's replication factor and the
// consistency level of reads and writes ("" for Weaviate's default).
func (s *Store) Replication() (factor int, consistency string) { return s.factor, s.cl }

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
	if s.cl != "" {
		get = get.WithConsistencyLevel(s.cl)
	}
	var resp *models.GraphQLResponse
	err = s.retry(ctx, func() (err error) {
		resp, err = get.Do(ctx)
		if err == nil && len(resp.Errors) > 0 {
			err = errors.New(resp.Errors[0].Message)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
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
		var ts []models.Tenant
		err := s.retry(ctx, func() (err error) {
			ts, err = s.c.Schema().TenantsGetter().WithClassName(s.class).Do(ctx)
			return err
		})
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
			if s.cl != "" {
				g = g.WithConsistencyLevel(s.cl)
			}
			var objs []*models.Object
			err := s.retry(ctx, func() (err error) {
				objs, err = g.Do(ctx)
				return err
			})
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
			vec := e.Vector
			e.Vector = nil
			obj, err := s.object(e, e, uuid.NewString(), vec)
			e.Vector = vec
			if err != nil {
				return fmt.Errorf("import experience %q: %w", e.ID, err)
			}
			objs[j] = obj
		}
		if err := s.writeView(ctx, objs...); err != nil {
			return fmt.Errorf("import experiences: %w", err)
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
	if err := s.retry(ctx, func() error { return s.c.Schema().ClassDeleter().WithClassName(s.class).Do(ctx) }); err != nil {
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
