package weaviate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// TestUnreachableIsStoreUnavailable: with the server killed, reads and
// writes fail with hindsight.ErrStoreUnavailable, which an answered "no"
// (an unknown id) and a caller's own cancellation are not; once the
// server is back on its data the same calls succeed, and reads made while
// it starts are not answered "not found".
func TestUnreachableIsStoreUnavailable(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: "Unreachable", RetryFor: 300 * time.Millisecond}, embedder.NewLocal(0))
	if err != nil {
		t.Fatal(err)
	}
	e := &hindsight.Experience{ID: "u1", Server: "files", Tool: "upload", Lesson: "retry the upload with a smaller chunk size",
		Situation: "the gateway answered 413", Confidence: 0.8, SourceTask: "t1"}
	if err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "", "missing"); !errors.Is(err, hindsight.ErrNotFound) || errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Fatalf("get of an unknown id: %v", err)
	}
	srv.Kill()
	if _, err := s.Get(ctx, "", "u1"); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Errorf("get with the server killed: %v", err)
	}
	if _, err := s.Search(ctx, hindsight.Query{Text: "upload chunk size", K: 3}); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Errorf("search with the server killed: %v", err)
	}
	if err := s.RecordHits(ctx, "", []string{"u1"}, time.Now()); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Errorf("hits with the server killed: %v", err)
	}
	e.Deleted = true
	if err := s.Put(ctx, e); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Errorf("put with the server killed: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Get(cctx, "", "u1"); err == nil || errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Errorf("get with a cancelled context: %v, want an error that is not ErrStoreUnavailable", err)
	}
	// Reads racing the restart: a server starting up answers "not found"
	// for what it holds until it is ready; the store must not believe it.
	stop := make(chan struct{})
	var ok, notFound atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := s.Get(ctx, "", "u1")
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, hindsight.ErrNotFound):
				notFound.Add(1)
				t.Errorf("get during the restart: %v", err)
			}
		}
	})
	srv.Start(t)
	for range 100 { // until a read succeeded, within 10 s
		if ok.Load() > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if ok.Load() == 0 || notFound.Load() > 0 {
		t.Fatalf("reads during the restart: %d found, %d not found", ok.Load(), notFound.Load())
	}
	got, err := s.Get(ctx, "", "u1")
	if err != nil {
		t.Fatalf("get after the restart: %v", err)
	}
	got.Deleted = true
	if err := s.Put(ctx, got); err != nil {
		t.Fatalf("put after the restart: %v", err)
	}
}

// TestBreakerFailsFastWhileDown: with the server killed, the first call
// finds it down at once instead of spending its retry budget (an hour
// here: a retry would outlast the test), later calls fail without asking
// it, and once it is back on the same data and ports the calls go
// through again.
func TestBreakerFailsFastWhileDown(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: "Breaker", RetryFor: time.Hour}, embedder.NewLocal(0))
	if err != nil {
		t.Fatal(err)
	}
	e := &hindsight.Experience{ID: "b1", Server: "files", Tool: "upload", Lesson: "retry the upload with a smaller chunk size",
		Situation: "the gateway answered 413", Confidence: 0.8, SourceTask: "t1"}
	if err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := s.RecordHits(ctx, "", []string{"b1"}, time.Now()); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Fatalf("first call with the server killed: %v", err)
	}
	_, err = s.Search(ctx, hindsight.Query{Text: "upload chunk size", K: 3})
	if !errors.Is(err, hindsight.ErrStoreUnavailable) || !strings.Contains(err.Error(), "not asked again until it answers ready") {
		t.Fatalf("search with the breaker open: %v", err)
	}
	srv.Start(t) // same data directory and ports
	var got *hindsight.Experience
	for range 200 { // a probe a second at most: within 20 s
		if got, err = s.Get(ctx, "", "b1"); err == nil || !errors.Is(err, hindsight.ErrStoreUnavailable) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("get after the restart: %v", err)
	}
	got.Deleted = true
	if err := s.Put(ctx, got); err != nil {
		t.Fatalf("put after the restart: %v", err)
	}
	if _, err := s.Search(ctx, hindsight.Query{Text: "upload chunk size", K: 3}); err != nil {
		t.Fatalf("search after the restart: %v", err)
	}
}
