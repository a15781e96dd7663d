package embedded_test

import (
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/embed"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/storetest"
)

func TestConformance(t *testing.T) {
	emb := embed.NewLocal(0)
	dirs := map[hindsight.ExperienceStore]string{}
	storetest.Run(t, storetest.Backend{
		Embedder: emb,
		New: func(t *testing.T) hindsight.ExperienceStore {
			dir := t.TempDir()
			s, err := embedded.Open(dir, emb, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dirs[s] = dir
			return s
		},
		Reopen: func(t *testing.T, s hindsight.ExperienceStore) hindsight.ExperienceStore {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			n, err := embedded.Open(dirs[s], emb, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dirs[n] = dirs[s]
			return n
		},
	})
}
