package weaviate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/rank"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
	wv "github.com/weaviate/weaviate-go-client/v5/weaviate"
	"github.com/weaviate/weaviate/entities/models"
)

func refClock() time.Time { return benchset.RefTime }

// TestRetrieval runs the retrieval benchmarks (store/testdata/retrieval)
// against Weaviate: each arm alone (the other weighed next to nothing),
// the fusion, and BM25 alone and the fusion with the filters the sidecar
// knows. The fusion must reach BM25's hit@3 alone, with and without
// filters.
func TestRetrieval(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	const off = 1e-9 // an arm's weight that only breaks ties
	modes := []struct {
		name    string
		opt     rank.Options
		filters bool
	}{
		{"bm25", rank.Options{VectorWeight: off, TemplateWeight: -1}, false},
		{"vector", rank.Options{BM25Weight: off, TemplateWeight: -1}, false},
		{"hybrid", rank.Options{}, false},
		{"bm25+filters", rank.Options{VectorWeight: off, TemplateWeight: -1}, true},
		{"hybrid+filters", rank.Options{}, true},
	}
	for _, set := range []struct{ name, prefix, class string }{
		{"main", "", "BenchMain"}, {"hard", benchset.HardPrefix, "BenchHard"},
	} {
		exps, qs, err := benchset.LoadSet("../testdata/retrieval", set.prefix)
		if err != nil {
			t.Fatal(err)
		}
		s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: set.class, Now: refClock}, embedder.NewLocal(0))
		if err != nil {
			t.Fatal(err)
		}
		ptrs := make([]*hindsight.Experience, len(exps))
		for i := range exps {
			ptrs[i] = &exps[i]
		}
		if err := s.Import(ctx, ptrs); err != nil {
			t.Fatal(err)
		}
		rates := map[string][2]float64{}
		for _, m := range modes {
			s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: set.class, Now: refClock, Rank: m.opt}, embedder.NewLocal(0))
			if err != nil {
				t.Fatal(err)
			}
			var h1, h3 int
			for _, bq := range qs {
				q := hindsight.Query{Text: bq.Text, ErrorTemplate: bq.ErrorTemplate, K: 3, NoHit: true}
				if m.filters {
					q.Server, q.Tool, q.ErrorCode = bq.Server, bq.Tool, bq.ErrorCode
				}
				res, err := s.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range res {
					if r.ID == bq.Want {
						if i == 0 {
							h1++
						}
						h3++
					}
				}
			}
			rates[m.name] = [2]float64{float64(h1) / float64(len(qs)), float64(h3) / float64(len(qs))}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "weaviate %s retrieval: %d experiences, %d queries\n", set.name, len(exps), len(qs))
		for _, m := range modes {
			fmt.Fprintf(&b, "%-16s hit@1 %.3f hit@3 %.3f\n", m.name, rates[m.name][0], rates[m.name][1])
		}
		t.Log("\n" + b.String())
		if r := rates["hybrid+filters"]; r[0] < 0.85 || r[1] < 0.95 {
			t.Errorf("%s: hybrid+filters hit@1 %.3f hit@3 %.3f, floor 0.85 / 0.95", set.name, r[0], r[1])
		}
		if r := rates["hybrid"]; r[1] < 0.8 {
			t.Errorf("%s: hybrid hit@3 %.3f, floor 0.8", set.name, r[1])
		}
		for _, pair := range [][2]string{{"hybrid", "bm25"}, {"hybrid+filters", "bm25+filters"}} {
			if f, l := rates[pair[0]], rates[pair[1]]; f[1] < l[1] {
				t.Errorf("%s: %s hit@3 %.3f below %s alone %.3f", set.name, pair[0], f[1], pair[1], l[1])
			}
		}
	}
}

// TestMigrate checks that Open upgrades an older Hindsight collection,
// refuses a collection it did not make, and goes lexical-only (refusing
// writes) when the collection holds another embedder's vectors.
func TestMigrate(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	host := strings.TrimPrefix(srv.URL, "http://")
	c, err := wv.NewClient(wv.Config{Host: host, Scheme: "http"})
	if err != nil {
		t.Fatal(err)
	}
	// A v0 collection: no "created" property.
	old := &models.Class{Class: "OldExperiences", Description: "hindsight schema v0; embedder hindsight-hash-v1/512",
		Vectorizer: "none", MultiTenancyConfig: &models.MultiTenancyConfig{Enabled: true, AutoTenantCreation: true},
		Properties: []*models.Property{{Name: "doc", DataType: []string{"text"}}}}
	if err := c.Schema().ClassCreator().WithClass(old).Do(ctx); err != nil {
		t.Fatal(err)
	}
	emb := embedder.NewLocal(0)
	s, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, Class: "OldExperiences"}, emb)
	if err != nil {
		t.Fatalf("open v0 collection: %v", err)
	}
	got, err := c.Schema().ClassGetter().WithClassName("OldExperiences").Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got.Properties {
		names = append(names, p.Name)
	}
	for _, want := range []string{"terms", "tool", "errorCode", "lastActive", "created"} {
		if !slices.Contains(names, want) {
			t.Errorf("migrated collection lacks %s: %v", want, names)
		}
	}
	if !strings.Contains(got.Description, fmt.Sprintf("schema v%d", weaviate.SchemaVersion)) {
		t.Errorf("description not updated: %q", got.Description)
	}
	e := &hindsight.Experience{ID: "m1", Tool: "read_file", ErrorCode: "ENOENT", Lesson: "list the directory first", Confidence: 0.9}
	if err := s.Put(ctx, e); err != nil {
		t.Fatalf("put into migrated collection: %v", err)
	}

	// Not ours.
	foreign := &models.Class{Class: "SomeoneElses", Vectorizer: "none", Properties: []*models.Property{{Name: "x", DataType: []string{"text"}}}}
	if err := c.Schema().ClassCreator().WithClass(foreign).Do(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, Class: "SomeoneElses"}, emb); err == nil {
		t.Error("opened a collection Hindsight did not make")
	}

	// Another embedder: lexical search still works, writes are refused.
	s2, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, Class: "OldExperiences"}, embedder.NewLocal(256))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s2.Search(ctx, hindsight.Query{Text: "read_file list the directory", NoHit: true})
	if err != nil || len(res) != 1 || res[0].ID != "m1" {
		t.Fatalf("lexical search with a changed embedder: %v %v", res, err)
	}
	if err := s2.Put(ctx, &hindsight.Experience{ID: "m2", Lesson: "x"}); !errors.Is(err, store.ErrDimension) {
		t.Fatalf("put with a changed embedder: %v, want ErrDimension", err)
	}
	if n := s2.NeedsReembed(); n != 1 {
		t.Fatalf("NeedsReembed = %d, want 1", n)
	}
	// Re-embedding rebuilds the collection for the new embedder and keeps
	// the experience as it was.
	var last int
	if err := s2.Reembed(ctx, embedder.NewLocal(256), func(done, total int) { last = done }); err != nil {
		t.Fatal(err)
	}
	if last != 1 || s2.NeedsReembed() != 0 {
		t.Fatalf("progress %d, still stale %d", last, s2.NeedsReembed())
	}
	g, err := s2.Get(ctx, "", "m1")
	if err != nil || len(g.Vector) != 256 || g.Version != e.Version || g.Lesson != e.Lesson {
		t.Fatalf("after re-embed: %+v %v", g, err)
	}
	res, err = s2.Search(ctx, hindsight.Query{Text: "read_file list the directory", NoHit: true, Explain: true})
	if err != nil || len(res) != 1 || res[0].Explain.VectorRank != 1 {
		t.Fatalf("search after re-embed: %+v %v", res, err)
	}
	if err := s2.Put(ctx, &hindsight.Experience{ID: "m2", Lesson: "x"}); err != nil {
		t.Fatalf("put after re-embed: %v", err)
	}
}

func TestTenantNames(t *testing.T) {
	for ns, want := range map[string]string{"": "default", "team-a": "team-a", "Team_B1": "Team_B1"} {
		if got := weaviate.Tenant(ns); got != want {
			t.Errorf("Tenant(%q) = %q, want %q", ns, got, want)
		}
	}
	a, b := weaviate.Tenant("team a/ü"), weaviate.Tenant("team a/u")
	if a == b || !strings.HasPrefix(a, "ns-") || len(a) > 64 {
		t.Errorf("hashed tenants %q %q", a, b)
	}
}
