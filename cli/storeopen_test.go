package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestOpenOrPending: a store that is unreachable at start is stood for by
// a store.Pending at once and opened in the background, where it then
// answers; a store that refuses is an error at once, not retried.
func TestOpenOrPending(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb := embedder.NewLocal(0)
	down := fmt.Errorf("open weaviate store: %w: connection refused", hindsight.ErrStoreUnavailable)
	var tries atomic.Int32
	open := func(context.Context) (hindsight.ExperienceStore, error) {
		if tries.Add(1) < 3 {
			return nil, down
		}
		return embedded.Open(t.TempDir(), emb, embedded.Options{Logger: logger})
	}
	st, err := openOrPending(ctx, emb, logger, open)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, ok := st.(*store.Pending)
	if !ok {
		t.Fatalf("got %T, want a *store.Pending", st)
	}
	if _, err := p.List(ctx, hindsight.ListOptions{}); !errors.Is(err, hindsight.ErrStoreUnavailable) {
		t.Fatalf("list before the store opened: %v", err)
	}
	select { // backoff of 1 s then 2 s
	case <-p.Ready():
	case <-time.After(time.Minute):
		t.Fatalf("not opened after %d tries", tries.Load())
	}
	if _, err := p.List(ctx, hindsight.ListOptions{}); err != nil || tries.Load() != 3 {
		t.Fatalf("list once opened: %v (after %d tries)", err, tries.Load())
	}

	refused := errors.New("open weaviate store: collection has replication factor 3, configured 1")
	tries.Store(0)
	st, err = openOrPending(ctx, emb, logger, func(context.Context) (hindsight.ExperienceStore, error) {
		tries.Add(1)
		return nil, refused
	})
	if !errors.Is(err, refused) || st != nil || tries.Load() != 1 {
		t.Fatalf("a refusing store: %v, %v after %d tries; want its error at once", st, err, tries.Load())
	}
}
