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
// one a second, finds it ready (see breaker.go). With Config.Failover a
// REST request that cannot reach its node (a dial error) goes to the next
// node of the cluster instead (see failover.go); gRPC does not.
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
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
	wv "github.com/weaviate/weaviate-go-client/v5/weaviate"
	"github.com/weaviate/weaviate-go-client/v5/weaviate/grpc"
)

// SchemaVersion is the version of the collection layout this package
// writes. Open migrates older collections up to it (adding properties).
const SchemaVersion = 3

// DefaultClass is the collection name used when Config.Class is empty.
const DefaultClass = "HindsightExperience"

// Config locates the Weaviate cluster.
type Config struct {
	URL string // REST address, e.g. http://127.0.0.1:8080 (HINDSIGHT_WEAVIATE_URL)
	// Failover lists the REST addresses of other nodes of the same
	// cluster. A request that cannot reach the current node (a dial
	// error: nothing was sent) is sent to the next one, and the store
	// stays there until it tries URL again 30 s later (see failover.go).
	// The gRPC connection (GRPC) is not failed over.
	Failover []string
	GRPC     string        // gRPC host:port, e.g. 127.0.0.1:50051 (HINDSIGHT_WEAVIATE_GRPC); optional
	APIKey   string        // optional bearer key
	Class    string        // collection name; DefaultClass when empty
	Timeout  time.Duration // one request's; 0 means DefaultTimeout
	Rank     rank.Options
	Logger   *slog.Logger
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
	// HTTPClient carries the REST requests (its Timeout, when zero, is
	// set to Timeout's); nil: a client of its own.
	HTTPClient *http.Client
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
	tenants tenantSet  // tenants known to exist

	instance string          // this store's id in its hit counters' object ids
	hitc     map[string]hits // this instance's hit counters, by object id
	dmu      sync.Mutex
	deltas   map[string]delta      // deltas read, by object id (they never change)
	cps      map[string]checkpoint // checkpoints read, by object id (likewise)
	st       stats
	// stopAfterCheckpoint makes a compaction stop after writing its
	// checkpoint, as a process killed then would (tests).
	stopAfterCheckpoint bool
	// afterReembedRead runs once Reembed has read every experience,
	// before it drops the collection (tests).
	afterReembedRead func()

	repl     replication
	retryFor time.Duration
	brk      breaker   // fails calls at once while Weaviate is known to be down
	fo       *failover // nil without Config.Failover
}

// replication is the collection's replication: the factor and the
// consistency level of reads and writes that follows from it.
type replication struct {
	factor int    // replication factor wanted (0: any) and, after migrate, in force
	cl     string // consistency level, "" for Weaviate's default
	clWant string // consistency level configured (Config.Consistency)
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	wc := wv.Config{Host: u.Host, Scheme: u.Scheme, Timeout: cfg.Timeout}
	var fo *failover
	if cfg.HTTPClient != nil || len(cfg.Failover) > 0 {
		hc := http.Client{}
		if cfg.HTTPClient != nil {
			hc = *cfg.HTTPClient
		}
		if hc.Timeout == 0 {
			hc.Timeout = cfg.Timeout
		}
		if len(cfg.Failover) > 0 {
			if fo, err = newFailover(hc.Transport, append([]string{cfg.URL}, cfg.Failover...), cfg.Logger); err != nil {
				return nil, fmt.Errorf("open weaviate store: %w", err)
			}
			hc.Transport = fo
		}
		wc.ConnectionClient = &hc
	}
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
	s := &Store{c: c, class: cfg.Class, opt: cfg.Rank, log: cfg.Logger, emb: emb, embID: store.EmbedderID(emb), tenants: tenantSet{known: map[string]bool{}},
		instance: uuid.NewString(), hitc: map[string]hits{}, deltas: map[string]delta{}, cps: map[string]checkpoint{},
		repl: replication{factor: cfg.ReplicationFactor, clWant: cfg.Consistency}, retryFor: cfg.RetryFor, fo: fo}
	if s.repl.factor < 0 {
		return nil, fmt.Errorf("open weaviate store: replication factor %d", s.repl.factor)
	}
	if _, err := consistency(s.repl.clWant, 1); err != nil {
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
	s.brk = breaker{probe: s.probeReady, now: time.Now, every: probeEvery}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("open weaviate store: %w", err)
	}
	return s, nil
}

// setFactor records the factor in force and the consistency level that
// follows.
func (s *Store) setFactor(factor int) error {
	cl, err := consistency(s.repl.clWant, factor)
	if err != nil {
		return err
	}
	s.repl.factor, s.repl.cl = factor, cl
	return nil
}

// Replication returns the collection's replication factor and the
// consistency level of reads and writes ("" for Weaviate's default).
func (s *Store) Replication() (factor int, consistency string) { return s.repl.factor, s.repl.cl }

// Close releases the client's connections.
func (s *Store) Close() error { return nil }
