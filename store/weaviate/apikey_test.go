package weaviate_test

import (
	"context"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// TestAPIKey runs Weaviate with API-key authentication and anonymous
// access off: the store opens and works with the key, and is refused
// without it or with another.
func TestAPIKey(t *testing.T) {
	const key = "hs-test-key-5b1f"
	srv := weaviatetest.StartWithAPIKey(t, key)
	emb := embedder.NewLocal(0)
	for _, tc := range []struct {
		name string
		key  string
		ok   bool
	}{
		{"no key", "", false},
		{"wrong key", "not-the-key", false},
		{"the key", key, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, APIKey: tc.key, Class: "HindsightAuth"}, emb)
			if !tc.ok {
				if err == nil {
					s.Close()
					t.Fatal("opened without the right API key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			e := &hindsight.Experience{ID: "k1", Tool: "read_file", Situation: "s", Lesson: "Use absolute paths.", Confidence: 0.7}
			if err := s.Put(ctx, e); err != nil {
				t.Fatalf("put with the key: %v", err)
			}
			res, err := s.Search(ctx, hindsight.Query{Text: "absolute paths", K: 1, NoHit: true})
			if err != nil || len(res) != 1 {
				t.Fatalf("search (gRPC) with the key = %v, %v", res, err)
			}
		})
	}
}
