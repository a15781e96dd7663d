package weaviate_test

import (
	"context"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embed"
	"github.com/hindsight-proxy/hindsight/store/storetest"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

func TestConformance(t *testing.T) {
	srv := weaviatetest.Start(t)
	emb := embed.NewLocal(0)
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
