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
	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/rank"
)

// sweep makes TestRetrievalWeights print hit rates over a grid of arm
// weights; -update (testkit's) rewrites store/testdata/retrieval from the
// generator.
var sweep = flag.Bool("sweep", false, "TestRetrievalWeights: print hit rates over a grid of arm weights")

const benchDir = "../testdata/retrieval"

// benchSet is one committed retrieval benchmark.
type benchSet struct {
	name, prefix   string
	generate       func() ([]hindsight.Experience, []benchset.Query)
	minExp, minQ   int
	floors         map[string][2]float64 // hit@1, hit@3 by mode, a little below what was measured
	wantZh, wantTm bool                  // must have Chinese queries, queries with a template
	// dataNow: "now" is the newest experience's update, not
	// benchset.RefTime (the lessons of a corpus keep its times).
	dataNow bool
}

var benchSets = []benchSet{
	{name: "main", prefix: "", generate: benchset.Generate, minExp: 2000, minQ: 200, wantZh: true,
		floors: map[string][2]float64{
			"bm25": {0.39, 0.89}, "vector": {0.28, 0.83}, "hybrid": {0.38, 0.89}, "hybrid+filters": {0.93, 0.98},
		}},
	{name: "hard", prefix: benchset.HardPrefix, generate: benchset.GenerateHard, minExp: 300, minQ: 60, wantTm: true,
		floors: map[string][2]float64{
			"bm25": {0.7, 0.88}, "vector": {0.8, 0.95}, "hybrid": {0.83, 0.95}, "hybrid+filters": {0.9, 0.97},
		}},
	// The real set: lessons learned from the committed corpora, queries
	// from the real corpora's unseen failing calls (written by eval's
	// TestRetrievalSetData, not generated here).
	{name: "real", prefix: "real-", minExp: 30, minQ: 30, dataNow: true, wantTm: false,
		floors: map[string][2]float64{
			"bm25": {0.95, 0.95}, "hybrid": {0.95, 0.95}, "hybrid+filters": {0.93, 0.93},
		}},
}

// TestRetrievalData checks that the committed benchmarks are what the
// generator makes (run with -update to rewrite them) and big enough.
func TestRetrievalData(t *testing.T) {
	for _, set := range benchSets {
		if set.generate == nil {
			continue
		}
		t.Run(set.name, func(t *testing.T) {
			exps, qs := set.generate()
			if testkit.Update() {
				if err := benchset.WriteSet(benchDir, set.prefix, exps, qs); err != nil {
					t.Fatal(err)
				}
			}
			gotE, gotQ, err := benchset.LoadSet(benchDir, set.prefix)
			if err != nil {
				t.Fatalf("%v (regenerate with -update)", err)
			}
			if len(gotE) < set.minExp || len(gotQ) < set.minQ {
				t.Fatalf("benchmark has %d experiences and %d queries, want ≥%d and ≥%d", len(gotE), len(gotQ), set.minExp, set.minQ)
			}
			if !reflect.DeepEqual(gotQ, qs) || len(gotE) != len(exps) {
				t.Fatal("committed benchmark differs from the generator; run go test ./store/embedded -run TestRetrievalData -update")
			}
			for i := range exps {
				a, b := gotE[i], exps[i]
				if a.ID != b.ID || a.Lesson != b.Lesson || a.Situation != b.Situation || !a.CreatedAt.Equal(b.CreatedAt) ||
					a.SupersededBy != b.SupersededBy || a.ErrorTemplate != b.ErrorTemplate {
					t.Fatalf("experience %d differs from the generator; run with -update", i)
				}
			}
			zh, tm := 0, 0
			for _, q := range gotQ {
				if q.Lang == "zh" {
					zh++
				}
				if q.ErrorTemplate != "" {
					tm++
				}
			}
			if set.wantZh && zh == 0 {
				t.Error("no Chinese queries")
			}
			if set.wantTm && (tm == 0 || tm == len(gotQ)) {
				t.Errorf("%d of %d queries carry a template, want some but not all", tm, len(gotQ))
			}
		})
	}
}

// TestHardTemplates checks that each hard query's template, where it has
// one, matches its target's and no other error of the same tool.
func TestHardTemplates(t *testing.T) {
	exps, qs, err := benchset.LoadSet(benchDir, benchset.HardPrefix)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*hindsight.Experience{}
	for i := range exps {
		byID[exps[i].ID] = &exps[i]
	}
	for _, q := range qs {
		if q.ErrorTemplate == "" {
			continue
		}
		want := byID[q.Want]
		if !rank.TemplateMatch(q.ErrorTemplate, want.ErrorTemplate) {
			t.Errorf("%s: template %q does not match its target's %q", q.ID, q.ErrorTemplate, want.ErrorTemplate)
		}
		for i := range exps {
			e := &exps[i]
			if e.Tool == q.Tool && e.ErrorTemplate != want.ErrorTemplate && rank.TemplateMatch(q.ErrorTemplate, e.ErrorTemplate) {
				t.Errorf("%s: template %q also matches %q", q.ID, q.ErrorTemplate, e.ErrorTemplate)
			}
		}
	}
}

type retrievalMode struct {
	name    string
	use     int
	filters bool
}

// retrievalModes are the arms alone and fused; "hybrid" and
// "hybrid+filters" are what Search does.
var retrievalModes = []retrievalMode{
	{"bm25", useBM25, false},
	{"vector", useVector, false},
	{"bm25+vector", useBM25 | useVector, false},
	{"hybrid", useAll, false},
	{"bm25+filters", useBM25, true},
	{"hybrid+filters", useAll, true},
}

// hitRates runs qs against s in each mode and returns hit@1 and hit@3 by
// mode name.
func hitRates(t testing.TB, s *Store, qs []benchset.Query) map[string][2]float64 {
	out := map[string][2]float64{}
	vecs := make([][]float32, len(qs))
	for i, bq := range qs {
		vs, err := s.emb.Embed(context.Background(), []string{bq.Text})
		if err != nil {
			t.Fatal(err)
		}
		vecs[i] = slices.Clone(vs[0])
		normalize(vecs[i])
	}
	for _, m := range retrievalModes {
		var h1, h3 int
		for i, bq := range qs {
			q := hindsight.Query{Text: bq.Text, ErrorTemplate: bq.ErrorTemplate, K: 3, NoHit: true}
			if m.filters {
				q.Server, q.Tool, q.ErrorCode = bq.Server, bq.Tool, bq.ErrorCode
			}
			res, err := s.search(&q, vecs[i], m.use)
			if err != nil {
				t.Fatal(err)
			}
			// A query is hit once, at its best-ranked relevant experience.
			if j := slices.IndexFunc(res, func(r hindsight.ScoredExperience) bool {
				return r.ID == bq.Want || slices.Contains(bq.Relevant, r.ID)
			}); j >= 0 {
				if j == 0 {
					h1++
				}
				h3++
			}
		}
		n := float64(len(qs))
		out[m.name] = [2]float64{float64(h1) / n, float64(h3) / n}
	}
	return out
}

// openBench loads a benchmark set into a new store on the local embedder.
func openBench(t testing.TB, set benchSet) (*Store, []hindsight.Experience, []benchset.Query) {
	exps, qs, err := benchset.LoadSet(benchDir, set.prefix)
	if err != nil {
		t.Fatal(err)
	}
	now := benchset.RefTime
	if set.dataNow {
		now = time.Time{}
		for _, e := range exps {
			if e.UpdatedAt.After(now) {
				now = e.UpdatedAt
			}
		}
	}
	s, err := Open(t.TempDir(), embedder.NewLocal(0), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	putAll(t, s, exps)
	return s, exps, qs
}

// TestRetrieval measures hit@1 and hit@3 on the committed benchmarks for
// each arm alone (BM25, vector), BM25 and vector fused, the full fusion
// (with the query's error template), and BM25 alone and the full fusion
// with the filters the sidecar knows (server, tool, error code). It holds
// each to a floor a little below what it measured, and the fusion to at
// least BM25's hit@3 alone, with and without filters, on every set and
// over all the sets' queries together.
func TestRetrieval(t *testing.T) {
	hits := map[string]float64{} // queries hit at 3, by mode, over all sets
	total := 0
	for _, set := range benchSets {
		t.Run(set.name, func(t *testing.T) {
			s, exps, qs := openBench(t, set)
			rates := hitRates(t, s, qs)
			total += len(qs)
			for m, r := range rates {
				hits[m] += r[1] * float64(len(qs))
			}
			var zh []benchset.Query
			tm := 0
			for _, q := range qs {
				if q.Lang == "zh" {
					zh = append(zh, q)
				}
				if q.ErrorTemplate != "" {
					tm++
				}
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s retrieval benchmark: %d experiences, %d queries (%d Chinese, %d with an error template), local hashing embedder\n",
				set.name, len(exps), len(qs), len(zh), tm)
			var zhRates map[string][2]float64
			if len(zh) > 0 {
				zhRates = hitRates(t, s, zh)
				fmt.Fprintf(&b, "%-16s %6s %6s   %9s %9s\n", "mode", "hit@1", "hit@3", "zh hit@1", "zh hit@3")
			} else {
				fmt.Fprintf(&b, "%-16s %6s %6s\n", "mode", "hit@1", "hit@3")
			}
			for _, m := range retrievalModes {
				r := rates[m.name]
				fmt.Fprintf(&b, "%-16s %6.3f %6.3f", m.name, r[0], r[1])
				if zhRates != nil {
					z := zhRates[m.name]
					fmt.Fprintf(&b, "   %9.3f %9.3f", z[0], z[1])
				}
				b.WriteByte('\n')
			}
			t.Log("\n" + b.String())
			for name, f := range set.floors {
				if r := rates[name]; r[0] < f[0] || r[1] < f[1] {
					t.Errorf("%s: hit@1 %.3f hit@3 %.3f, floor %.3f / %.3f", name, r[0], r[1], f[0], f[1])
				}
			}
			for _, pair := range [][2]string{{"hybrid", "bm25"}, {"hybrid+filters", "bm25+filters"}} {
				if f, l := rates[pair[0]], rates[pair[1]]; f[1] < l[1] {
					t.Errorf("%s hit@3 %.3f below %s alone %.3f", pair[0], f[1], pair[1], l[1])
				}
			}
		})
	}
	for _, pair := range [][2]string{{"hybrid", "bm25"}, {"hybrid+filters", "bm25+filters"}} {
		f, l := hits[pair[0]]/float64(total), hits[pair[1]]/float64(total)
		t.Logf("all sets, %d queries: %s hit@3 %.3f, %s %.3f", total, pair[0], f, pair[1], l)
		if f < l-1e-9 {
			t.Errorf("all sets: %s hit@3 %.3f below %s alone %.3f", pair[0], f, pair[1], l)
		}
	}
}

// TestRetrievalWeights prints hit@1/hit@3 over a grid of vector and
// template arm weights (run with -sweep; the measurement behind
// rank.HashVectorWeight and rank.DefaultTemplateWeight).
func TestRetrievalWeights(t *testing.T) {
	if !*sweep {
		t.Skip("run with -sweep")
	}
	for _, set := range benchSets {
		s, _, qs := openBench(t, set)
		var b strings.Builder
		fmt.Fprintf(&b, "%s: vector weight, template weight → hybrid, hybrid+filters (hit@1/hit@3)\n", set.name)
		for _, vw := range []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1} {
			for _, tw := range []float64{-1, 0.05, 0.1, 0.15, 0.2, 0.3} {
				s.opt.Rank = rank.Options{VectorWeight: vw, TemplateWeight: tw}
				r := hitRates(t, s, qs)
				h, f := r["hybrid"], r["hybrid+filters"]
				fmt.Fprintf(&b, "%4.2f %5.2f   %.3f/%.3f   %.3f/%.3f\n", vw, max(tw, 0), h[0], h[1], f[0], f[1])
			}
		}
		t.Log("\n" + b.String())
	}
}

// putAll stores a copy of each of exps as new (version 0) in s.
func putAll(tb testing.TB, s *Store, exps []hindsight.Experience) {
	tb.Helper()
	ctx := context.Background()
	for i := range exps {
		e := exps[i]
		e.Version = 0
		if err := s.Put(ctx, &e); err != nil {
			tb.Fatal(err)
		}
	}
}
