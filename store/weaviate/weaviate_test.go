package weaviate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
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

// TestTwoStoresConcurrentLearning: two stores over one server (two
// daemons) learn the same lessons at once; each ends as one lesson.
func TestTwoStoresConcurrentLearning(t *testing.T) {
	srv := weaviatetest.Start(t)
	emb := embedder.NewLocal(0)
	var stores []*weaviate.Store
	for range 2 {
		s, err := weaviate.Open(context.Background(), weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: "TwoLearners"}, emb)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	concurrentLearning(t, stores[0], stores[1], "team")
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

// TestImportKeepsConcurrentEdit: one store imports a copy of an
// experience (an export, then an import with a change of its own) while
// another store edits it; whichever lands first, the edit's lesson, pin
// and evidence are kept, and the import's own change too.
func TestImportKeepsConcurrentEdit(t *testing.T) {
	srv := weaviatetest.Start(t)
	emb := embedder.NewLocal(0)
	ctx := context.Background()
	var a, b *weaviate.Store
	for _, s := range []**weaviate.Store{&a, &b} {
		var err error
		if *s, err = weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: "ImportRace"}, emb); err != nil {
			t.Fatal(err)
		}
	}
	for round, editFirst := range []bool{true, false} {
		id := fmt.Sprintf("x%d", round)
		if err := a.Put(ctx, exp("team", id, "pin the dependency before regenerating the lock file")); err != nil {
			t.Fatal(err)
		}
		pack, err := a.Get(ctx, "team", id) // the copy the import brings back
		if err != nil {
			t.Fatal(err)
		}
		pack.Situation = "the lock file changed under a pinned dependency"
		pack.Vector = nil
		edit := func() {
			e, err := b.Get(ctx, "team", id)
			if err != nil {
				t.Fatal(err)
			}
			e.Lesson, e.Pinned = "pin the dependency, then regenerate the lock file with --frozen", true
			e.EvidenceCount++
			e.EvidenceTasks = append(e.EvidenceTasks, "task-edit")
			if err := b.Put(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		imp := func() {
			if err := a.Import(ctx, []*hindsight.Experience{pack}); err != nil {
				t.Fatal(err)
			}
		}
		if editFirst {
			edit()
			imp()
		} else {
			imp()
			edit()
		}
		for _, s := range []*weaviate.Store{a, b} {
			g, err := s.Get(ctx, "team", id)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(g.Lesson, "--frozen") || !g.Pinned || g.EvidenceCount != 1 || !slices.Contains(g.EvidenceTasks, "task-edit") {
				t.Fatalf("edit first %v: the edit was dropped: lesson %q pinned %v evidence %d tasks %v", editFirst, g.Lesson, g.Pinned, g.EvidenceCount, g.EvidenceTasks)
			}
			if g.Situation != pack.Situation {
				t.Fatalf("edit first %v: the import's change was dropped: situation %q", editFirst, g.Situation)
			}
		}
	}
}
