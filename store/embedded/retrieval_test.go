package embedded

import (
	"context"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/embed"
	"github.com/hindsight-proxy/hindsight/store/internal/benchset"
)

var update = flag.Bool("update", false, "rewrite store/testdata/retrieval from the generator")

const benchDir = "../testdata/retrieval"

// TestRetrievalData checks that the committed benchmark is what the
// generator makes (run with -update to rewrite it) and big enough.
func TestRetrievalData(t *testing.T) {
	exps, qs := benchset.Generate()
	if *update {
		if err := benchset.Write(benchDir, exps, qs); err != nil {
			t.Fatal(err)
		}
	}
	gotE, gotQ, err := benchset.Load(benchDir)
	if err != nil {
		t.Fatalf("load benchmark (regenerate with -update): %v", err)
	}
	if len(gotE) < 2000 || len(gotQ) < 200 {
		t.Fatalf("benchmark has %d experiences and %d queries, want ≥2000 and ≥200", len(gotE), len(gotQ))
	}
	if !reflect.DeepEqual(gotQ, qs) || len(gotE) != len(exps) {
		t.Fatal("committed benchmark differs from the generator; run go test ./store/embedded -run TestRetrievalData -update")
	}
	for i := range exps {
		a, b := gotE[i], exps[i]
		if a.ID != b.ID || a.Lesson != b.Lesson || a.Situation != b.Situation || !a.CreatedAt.Equal(b.CreatedAt) || a.SupersededBy != b.SupersededBy {
			t.Fatalf("experience %d differs from the generator; run with -update", i)
		}
	}
	zh := 0
	for _, q := range gotQ {
		if q.Lang == "zh" {
			zh++
		}
	}
	if zh == 0 {
		t.Fatal("no Chinese queries")
	}
}

type retrievalMode struct {
	name    string
	use     int
	filters bool
}

var retrievalModes = []retrievalMode{
	{"bm25", useBM25, false},
	{"vector", useVector, false},
	{"hybrid", useBM25 | useVector, false},
	{"hybrid+filters", useBM25 | useVector, true},
}

// hitRates runs the benchmark's queries against s in each mode and
// returns hit@1 and hit@3 by mode name.
func hitRates(t testing.TB, s *Store, qs []benchset.Query) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, m := range retrievalModes {
		var h1, h3 int
		for _, bq := range qs {
			q := hindsight.Query{Text: bq.Text, K: 3, NoHit: true}
			if m.filters {
				q.Server, q.Tool, q.ErrorCode = bq.Server, bq.Tool, bq.ErrorCode
			}
			vs, err := s.emb.Embed(context.Background(), []string{q.Text})
			if err != nil {
				t.Fatal(err)
			}
			qv := slices.Clone(vs[0])
			normalize(qv)
			res := s.search(&q, qv, m.use)
			for i, r := range res {
				if r.ID == bq.Want {
					if i == 0 {
						h1++
					}
					h3++
				}
			}
		}
		n := float64(len(qs))
		out[m.name] = [2]float64{float64(h1) / n, float64(h3) / n}
	}
	return out
}

// TestRetrieval measures hit@1 and hit@3 on the committed benchmark for
// BM25 only, vector only, hybrid and hybrid with the filters the sidecar
// knows, and holds each to a floor a little below what it measured.
func TestRetrieval(t *testing.T) {
	exps, qs, err := benchset.Load(benchDir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.TempDir(), embed.NewLocal(0), Options{Now: func() time.Time { return benchset.RefTime }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range exps {
		e := exps[i]
		e.Version = 0
		if err := s.Put(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	rates := hitRates(t, s, qs)
	var zh []benchset.Query
	for _, q := range qs {
		if q.Lang == "zh" {
			zh = append(zh, q)
		}
	}
	zhRates := hitRates(t, s, zh)
	var b strings.Builder
	fmt.Fprintf(&b, "retrieval benchmark: %d experiences, %d queries (%d Chinese), local hashing embedder\n", len(exps), len(qs), len(zh))
	fmt.Fprintf(&b, "%-16s %6s %6s   %9s %9s\n", "mode", "hit@1", "hit@3", "zh hit@1", "zh hit@3")
	for _, m := range retrievalModes {
		r, z := rates[m.name], zhRates[m.name]
		fmt.Fprintf(&b, "%-16s %6.3f %6.3f   %9.3f %9.3f\n", m.name, r[0], r[1], z[0], z[1])
	}
	t.Log("\n" + b.String())
	// Measured (local embedder, deterministic): bm25 0.412/0.904, vector
	// 0.308/0.862, hybrid 0.381/0.915, hybrid+filters 0.915/1.000.
	floors := map[string][2]float64{ // hit@1, hit@3
		"bm25": {0.37, 0.87}, "vector": {0.27, 0.82}, "hybrid": {0.34, 0.88}, "hybrid+filters": {0.88, 0.97},
	}
	for name, f := range floors {
		if r := rates[name]; r[0] < f[0] || r[1] < f[1] {
			t.Errorf("%s: hit@1 %.3f hit@3 %.3f, floor %.3f / %.3f", name, r[0], r[1], f[0], f[1])
		}
	}
}
