package weaviate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/storetest"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

func TestConformance(t *testing.T) {
	srv := weaviatetest.Start(t)
	emb := embedder.NewLocal(0)
	n := 0
	classes := map[hindsight.ExperienceStore]string{}
	open := func(t *testing.T, class string) *weaviate.Store {
		s, err := weaviate.Open(context.Background(), weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: class}, emb)
		if err != nil {
			t.Fatal(err)
		}
		classes[s] = class
		return s
	}
	storetest.Run(t, storetest.Backend{
		Embedder: emb,
		New: func(t *testing.T) hindsight.ExperienceStore {
			n++ // one collection per test keeps them independent
			return open(t, "HindsightConformance"+string(rune('A'+n%26))+string(rune('A'+n/26)))
		},
		Reopen: func(t *testing.T, s hindsight.ExperienceStore) hindsight.ExperienceStore {
			s.Close()
			srv.Restart(t) // the server restarts too: data must survive on disk
			return open(t, classes[s])
		},
	})
}

// TestTwoStoresConcurrentEdits: two stores over one server (two daemons)
// edit one experience at once; every edit is kept.
func TestTwoStoresConcurrentEdits(t *testing.T) {
	srv := weaviatetest.Start(t)
	emb := embedder.NewLocal(0)
	var stores []*weaviate.Store
	for range 2 {
		s, err := weaviate.Open(context.Background(), weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: "TwoStores"}, emb)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	concurrentEdits(t, stores[0], stores[1])
}

// TestStoreDown: with the server down, a query bounded by its caller's
// deadline (query_hindsight's) fails by then instead of retrying on, a
// write then fails at once as unavailable, and writes succeed once the
// server is back.
func TestStoreDown(t *testing.T) {
	srv := weaviatetest.Start(t)
	emb := embedder.NewLocal(0)
	ctx := context.Background()
	s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: "StoreDown", RetryFor: time.Minute}, emb)
	if err != nil {
		t.Fatal(err)
	}
	e := &hindsight.Experience{ID: "d1", Server: "files", Tool: "upload", Lesson: "retry the upload with a smaller chunk size",
		Situation: "the gateway answered 413", Confidence: 0.8, SourceTask: "t1"}
	if err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	start := time.Now()
	_, err = s.Search(qctx, hindsight.Query{Text: "upload chunk size", K: 3})
	cancel()
	if err == nil {
		t.Fatal("a search with the server down succeeded")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a search with the server down took %v, past its 2 s deadline", took)
	}
	// The server is known to be down: a write fails at once as
	// unavailable (the daemon queues it) instead of retrying for a minute.
	e2 := &hindsight.Experience{ID: "d2", Server: "files", Tool: "upload", Lesson: "compress the payload before the upload",
		Situation: "the gateway answered 413 again", Confidence: 0.8, SourceTask: "t2"}
	if err := s.Put(ctx, e2); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Fatalf("a write with the server down: %v, want ErrStoreUnavailable", err)
	}
	srv.Start(t)
	for range 50 { // the breaker probes once a second at most
		if err = s.Put(ctx, e2); err == nil || !errors.Is(err, hindsight.ErrStoreUnavailable) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("a write once the server came back: %v", err)
	}
	if _, err := s.Get(ctx, "", "d2"); err != nil {
		t.Fatal(err)
	}
}
