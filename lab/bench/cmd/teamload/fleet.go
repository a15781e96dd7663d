//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/memory"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
	"github.com/hindsight-proxy/hindsight/traces"
	"github.com/prometheus/client_golang/prometheus"
)

// Each simulated daemon is the daemon's own code in this process: a
// daemon.Server with its trace database (for its store-op queue and its
// hit queue's count) on a Unix socket in its own home, over its own
// weaviate.Store (its own writer id in the hit counters), reached through
// a daemon.Client as a sidecar reaches it; its reflection is a
// reflect.Merger over that store, as the reflection worker runs it.
// Processes would add fifty Go runtimes on two cores and measure the
// machine more than the cluster.

// counterKey is the context key of a request counter (see counting).
type counterKey struct{}

// counting is an http.RoundTripper that counts every request to Weaviate,
// and also into the counter a request's context carries, if any.
type counting struct {
	next  http.RoundTripper
	total atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.total.Add(1)
	if n, ok := r.Context().Value(counterKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	return c.next.RoundTrip(r)
}

// searchTrips adds up the requests of the store's searches, by k.
type searchTrips struct {
	mu       sync.Mutex
	requests map[int]int64
	searches map[int]int64
}

func (t *searchTrips) add(k int, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests[k] += n
	t.searches[k]++
}

// perSearch returns the mean requests of a search at k.
func (t *searchTrips) perSearch(k int) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.searches[k] == 0 {
		return 0
	}
	return float64(t.requests[k]) / float64(t.searches[k])
}

// countedStore is a daemon's weaviate.Store whose searches count their
// requests (the daemon's search path adds none: it queues the hits).
type countedStore struct {
	*weaviate.Store
	trips *searchTrips
}

func (s countedStore) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	var n atomic.Int64
	res, err := s.Store.Search(context.WithValue(ctx, counterKey{}, &n), q)
	if err == nil {
		s.trips.add(q.K, n.Load())
	}
	return res, err
}

// member is one simulated daemon.
type member struct {
	id      int
	node    int // the Weaviate node its store talks to
	machine string
	store   *weaviate.Store
	client  *daemon.Client
	srv     *daemon.Server
	ops     *daemon.StoreOps
	metrics *reflect.Metrics
	stop    func() error
}

// fleetConfig is what every member shares.
type fleetConfig struct {
	dir      string
	urls     []string
	failover bool // each member gets the other nodes as its failover
	class    string
	emb      hindsight.Embedder
	http     *http.Client
	trips    *searchTrips
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startMember starts simulated daemon i against node i mod the nodes,
// with the nodes after it (in a ring) as its failover when cfg.failover.
func startMember(ctx context.Context, cfg fleetConfig, i int) (*member, error) {
	node := i % len(cfg.urls)
	var failover []string
	if cfg.failover {
		for j := 1; j < len(cfg.urls); j++ {
			failover = append(failover, cfg.urls[(node+j)%len(cfg.urls)])
		}
	}
	st, err := weaviate.Open(ctx, weaviate.Config{URL: cfg.urls[node], Failover: failover, Class: cfg.class, ReplicationFactor: 3,
		HTTPClient: cfg.http, Logger: quiet}, cfg.emb)
	if err != nil {
		return nil, fmt.Errorf("start daemon %d: %w", i, err)
	}
	home := hindsight.Home(filepath.Join(cfg.dir, fmt.Sprintf("d%02d", i)))
	tr, err := traces.Open(filepath.Join(string(home), "traces"), traces.Options{Logger: quiet, Badger: small})
	if err != nil {
		return nil, fmt.Errorf("start daemon %d: %w", i, err)
	}
	ops, err := memory.NewOps(tr, quiet)
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("start daemon %d: %w", i, err)
	}
	m := &member{id: i, node: node, machine: fmt.Sprintf("teamload/%02d", i), store: st, ops: ops, metrics: reflect.NewMetrics()}
	m.srv = &daemon.Server{Traces: tr, Store: countedStore{st, cfg.trips}, StoreName: "weaviate", StoreOps: ops,
		Home: home, Logger: quiet, Registry: prometheus.NewRegistry()}
	lock, err := daemon.AcquireLock(home)
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("start daemon %d: %w", i, err)
	}
	ln, err := daemon.Listen(home, lock)
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("start daemon %d: %w", i, err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- m.srv.Serve(sctx, ln) }()
	m.client = daemon.NewClient(home.Socket())
	m.stop = func() error {
		cancel()
		err := <-done
		m.client.CloseIdle()
		if e := tr.Close(); err == nil && e != nil {
			err = fmt.Errorf("close traces of daemon %d: %w", i, e)
		}
		return err
	}
	return m, nil
}

// small keeps each member's Badger small: fifty of them share the machine.
func small(o *badger.Options) {
	o.MemTableSize = 4 << 20
	o.BlockCacheSize = 1 << 20
	o.IndexCacheSize = 1 << 20
	o.NumMemtables = 2
	o.ValueLogFileSize = 16 << 20
}

// merger is member m's reflection into namespace ns.
func (m *member) merger(ns string, emb hindsight.Embedder) *reflect.Merger {
	return &reflect.Merger{Store: m.store, Embedder: emb, Namespace: ns, Machine: m.machine, Metrics: m.metrics, Logger: quiet}
}

// newHTTPClient returns the fleet's client to Weaviate, counting requests.
func newHTTPClient() (*http.Client, *counting) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	c := &counting{next: tr}
	return &http.Client{Transport: c, Timeout: 10 * time.Second}, c
}
