package weaviate_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// BenchmarkSearch runs the embedded store's latency benchmark queries
// against Weaviate holding n experiences in one tenant, over loopback.
func BenchmarkSearch(b *testing.B) {
	srv := weaviatetest.Start(b)
	ctx := context.Background()
	for _, n := range []int{10_000} {
		exps, qs := benchset.Synthetic(n, 500)
		s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: fmt.Sprintf("Bench%d", n), Now: refClock}, embedder.NewLocal(0))
		if err != nil {
			b.Fatal(err)
		}
		ptrs := make([]*hindsight.Experience, len(exps))
		for i := range exps {
			ptrs[i] = &exps[i]
		}
		start := time.Now()
		if err := s.Import(ctx, ptrs); err != nil {
			b.Fatal(err)
		}
		ingest := float64(n) / time.Since(start).Seconds()
		for _, filtered := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/filters=%v", n, filtered), func(b *testing.B) {
				var lat []time.Duration
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					bq := qs[i%len(qs)]
					i++
					q := hindsight.Query{Text: bq.Text, K: 3, NoHit: true}
					if filtered {
						q.Tool, q.ErrorCode = bq.Tool, bq.ErrorCode
					}
					t0 := time.Now()
					if _, err := s.Search(ctx, q); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				slices.Sort(lat)
				pct := func(p float64) float64 {
					return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)].Microseconds())
				}
				b.ReportMetric(pct(0.5), "p50-µs")
				b.ReportMetric(pct(0.99), "p99-µs")
				b.ReportMetric(ingest, "import-exp/s")
			})
		}
	}
}

// BenchmarkEdit measures an edit as the reflection merger makes it (Get,
// change, Put) of one experience, and a first Get by another store after
// those edits (it reads every delta once) against a Get of an unedited one.
func BenchmarkEdit(b *testing.B) {
	srv := weaviatetest.Start(b)
	ctx := context.Background()
	emb := embedder.NewLocal(0)
	open := func() *weaviate.Store {
		s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: "BenchEdit"}, emb)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	s := open()
	for _, id := range []string{"edited", "fresh"} {
		if err := s.Put(ctx, exp("team", id, "pin the dependency before regenerating the lock file")); err != nil {
			b.Fatal(err)
		}
	}
	edits := 0
	b.Run("edit", func(b *testing.B) {
		for b.Loop() {
			e, err := s.Get(ctx, "team", "edited")
			if err != nil {
				b.Fatal(err)
			}
			e.EvidenceCount++
			e.EvidenceTasks = append(e.EvidenceTasks, fmt.Sprintf("task-%d", edits))
			if err := s.Put(ctx, e); err != nil {
				b.Fatal(err)
			}
			edits++
		}
	})
	b.Run("first-get", func(b *testing.B) {
		var edited, fresh time.Duration
		for b.Loop() {
			s2 := open()
			t0 := time.Now()
			if _, err := s2.Get(ctx, "team", "fresh"); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := s2.Get(ctx, "team", "edited"); err != nil {
				b.Fatal(err)
			}
			fresh, edited = fresh+t1.Sub(t0), edited+time.Since(t1)
		}
		b.ReportMetric(float64(edits), "edits")
		b.ReportMetric(edited.Seconds()/fresh.Seconds(), "edited/fresh")
	})
}
