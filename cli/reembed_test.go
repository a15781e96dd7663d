package cli

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestReembedAfterEmbedderChange opens a real embedded store with one
// embedder, then with another of a different dimension: the daemon's
// start-up re-embeds every experience, after which none needs it and
// vector search works again.
func TestReembedAfterEmbedderChange(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := embedded.Open(dir, embedder.NewLocal(256), embedded.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, lesson := range []string{"Call login before fetch_report.", "Pass due_date as YYYY-MM-DD to create_invoice.", "Pass pause_ms=300 to send_invoice."} {
		e := &hindsight.Experience{Namespace: hindsight.DefaultNamespace, Server: "billing", Tool: "fetch_report",
			Situation: "s", Action: "a", Result: "r", Lesson: lesson, Confidence: 0.9}
		if err := st.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := reembed(ctx, st, embedder.NewLocal(256), quiet, true); err != nil || n != 0 {
		t.Fatalf("same embedder: re-embedded %d, %v; want 0, nil", n, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	other := embedder.NewLocal(128)
	st, err = embedded.Open(dir, other, embedded.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.NeedsReembed() != 3 {
		t.Fatalf("after the embedder changed, %d experiences need new vectors, want 3", st.NeedsReembed())
	}
	n, err := reembed(ctx, st, other, quiet, true)
	if err != nil || n != 3 {
		t.Fatalf("re-embedded %d, %v; want 3, nil", n, err)
	}
	if st.NeedsReembed() != 0 {
		t.Fatalf("%d still need re-embedding", st.NeedsReembed())
	}
	res, err := st.Search(ctx, hindsight.Query{Text: "invoice due date format", Explain: true, NoHit: true, K: 1})
	if err != nil || len(res) != 1 {
		t.Fatalf("search: %v, %d results", err, len(res))
	}
	if res[0].Explain == nil || res[0].Explain.VectorRank == 0 {
		t.Errorf("the best result was not found by vector after re-embedding: %+v", res[0].Explain)
	}
}
