package reflect

import (
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// The merge tests also run against the real embedded backend (Badger on
// disk) with its default local embedder.
func init() {
	emb := embedder.NewLocal(0)
	extraBackends = append(extraBackends, backend{
		name: "embedded",
		emb:  emb,
		open: func(t *testing.T) hindsight.ExperienceStore {
			s, err := embedded.Open(t.TempDir(), emb, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
