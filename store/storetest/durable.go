package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

func testRestart(t *testing.T, b Backend) {
	s := b.New(t)
	es := corpus()
	put(t, s, es...)
	es[0].Lesson += " (updated)"
	es[0].Vector = nil
	put(t, s, es[0])
	es[1].Deleted, es[1].Vector = true, nil
	put(t, s, es[1])
	ns := exp("ns", "read_file", "ENOENT", "namespaced lesson")
	ns.Namespace = "team-x"
	put(t, s, ns)
	if err := s.RecordHits(context.Background(), "", []string{"c4"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	t.Cleanup(func() { s.Close() })
	g := get(t, s, "", "c1")
	if g.Version != 2 || g.Lesson != es[0].Lesson || len(g.Vector) != b.Embedder.Dim() {
		t.Fatalf("after restart c1 = version %d lesson %q, %d dims", g.Version, g.Lesson, len(g.Vector))
	}
	if g := get(t, s, "", "c2"); !g.Deleted {
		t.Fatal("deleted flag lost in restart")
	}
	if g := get(t, s, "", "c4"); g.HitCount != 1 {
		t.Fatalf("hit count after restart = %d", g.HitCount)
	}
	if got := search(t, s, hindsight.Query{Text: "read_file ENOENT list the parent directory", Tool: "read_file", K: 5}); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("search after restart = %v, want [c1]", got)
	}
	if got := search(t, s, hindsight.Query{Text: "namespaced lesson", Namespace: "team-x", K: 5}); !slices.Equal(got, []string{"ns"}) {
		t.Fatalf("namespaced search after restart = %v", got)
	}
	// Writes continue from the stored version.
	g.Lesson += " again"
	g.Vector = nil
	if err := s.Put(context.Background(), g); err != nil || g.Version != 3 {
		t.Fatalf("put after restart: version %d err %v", g.Version, err)
	}
}

// testConcurrent writes, updates and searches from several goroutines; run
// with -race. Every write lands, and concurrent updates of one experience
// either succeed with consecutive versions or fail with ErrConflict.
func testConcurrent(t *testing.T, b Backend) {
	s := open(t, b)
	ctx := context.Background()
	shared := exp("shared", "fetch", "429", "back off when rate limited")
	put(t, s, shared)
	const workers, each = 4, 5
	var wg sync.WaitGroup
	var okUpdates atomic.Int32
	errs := make(chan error, workers*each*3)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := exp(fmt.Sprintf("w%d-%d", w, i), "read_file", "ENOENT", fmt.Sprintf("lesson %d of worker %d", i, w))
				if err := s.Put(ctx, e); err != nil {
					errs <- err
				}
				if _, err := s.Search(ctx, hindsight.Query{Text: "lesson worker read_file", K: 3}); err != nil {
					errs <- err
				}
				g, err := s.Get(ctx, "", "shared")
				if err != nil {
					errs <- err
					continue
				}
				g.Vector = nil
				g.Confidence = float64(w) / 10
				switch err := s.Put(ctx, g); {
				case err == nil:
					okUpdates.Add(1)
				case !errors.Is(err, hindsight.ErrConflict):
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	all, err := s.List(ctx, hindsight.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != workers*each+1 {
		t.Fatalf("List = %d experiences, want %d", len(all), workers*each+1)
	}
	if g := get(t, s, "", "shared"); g.Version != 1+int(okUpdates.Load()) {
		t.Fatalf("shared version %d after %d successful updates", g.Version, okUpdates.Load())
	}
}
