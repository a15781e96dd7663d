package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestPending: before Set every call fails with ErrStoreUnavailable
// (saying why the store is not open) and Ready is not closed; after Set,
// calls reach the store (a real embedded one on disk) and Ready is closed.
func TestPending(t *testing.T) {
	ctx := context.Background()
	emb := embedder.NewLocal(0)
	p := store.NewPending(emb)
	p.Failed(errors.New("dial tcp 127.0.0.1:8080: connection refused"))
	e := &hindsight.Experience{ID: "p1", Server: "files", Tool: "upload", Lesson: "retry the upload with a smaller chunk size",
		Situation: "the gateway answered 413", Confidence: 0.8, SourceTask: "t1"}
	_, getErr := p.Get(ctx, "", "p1")
	_, searchErr := p.Search(ctx, hindsight.Query{Text: "upload", K: 3})
	_, listErr := p.List(ctx, hindsight.ListOptions{})
	_, purgeErr := p.Purge(ctx, "", []string{"p1"})
	for name, err := range map[string]error{"put": p.Put(ctx, e), "get": getErr, "search": searchErr, "list": listErr,
		"hits": p.RecordHits(ctx, "", []string{"p1"}, time.Now()), "purge": purgeErr} {
		if !errors.Is(err, hindsight.ErrStoreUnavailable) {
			t.Errorf("%s before the store opened: %v, want ErrStoreUnavailable", name, err)
		}
	}
	if p.Embedder() != emb {
		t.Error("Embedder is not the one given")
	}
	select {
	case <-p.Ready():
		t.Fatal("ready before Set")
	default:
	}
	st, err := embedded.Open(t.TempDir(), emb, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Set(st) {
		t.Fatal("Set refused before Close")
	}
	<-p.Ready()
	if err := p.Put(ctx, e); err != nil {
		t.Fatalf("put after Set: %v", err)
	}
	if got, err := p.Get(ctx, "", "p1"); err != nil || got.Lesson != e.Lesson {
		t.Fatalf("get after Set: %+v, %v", got, err)
	}
	if n, err := p.Purge(ctx, "", []string{"p1"}); err != nil || n != 1 {
		t.Fatalf("purge after Set: %d, %v", n, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPendingClosedFirst: a store opened after Close is refused, so the
// opener closes it.
func TestPendingClosedFirst(t *testing.T) {
	emb := embedder.NewLocal(0)
	p := store.NewPending(emb)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := embedded.Open(t.TempDir(), emb, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if p.Set(st) || !p.Closed() {
		t.Fatal("Set accepted a store after Close")
	}
}
