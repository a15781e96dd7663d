package reflect

import (
	"context"
	"fmt"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// TestMergeWeaviate runs the dedupe and supersede tests against the real
// Weaviate backend, one collection per test.
func TestMergeWeaviate(t *testing.T) {
	srv := weaviatetest.Start(t)
	emb := embedder.NewLocal(0)
	n := 0
	runMergeTests(t, backend{
		name: "weaviate",
		emb:  emb,
		open: func(t *testing.T) hindsight.ExperienceStore {
			n++
			s, err := weaviate.Open(context.Background(), weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: fmt.Sprintf("HindsightReflect%d", n)}, emb)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
