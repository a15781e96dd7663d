package embedded

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/store/tokenize"
)

// sortedEmbedder hashes a text's words and their trigrams into 512
// dimensions in sorted order. Unlike embedder.Local, whose sums follow
// map order, it gives the same bits every run, which a pinned ranking
// needs.
type sortedEmbedder struct{}

func (sortedEmbedder) Name() string { return "test-sorted" }
func (sortedEmbedder) Dim() int     { return 512 }

func (sortedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 512)
		terms := tokenize.IndexTerms(nil, t)
		slices.Sort(terms)
		for _, w := range terms {
			feats := []string{w}
			for k := 0; k+3 <= len(w); k++ {
				feats = append(feats, "#"+w[k:k+3])
			}
			for _, f := range feats {
				h := fnv.New64a()
				h.Write([]byte(f))
				s := h.Sum64()
				v[s%512] += float32(math.Copysign(1, float64(int64(s))))
			}
		}
		out[i] = v
	}
	return out, nil
}

// TestRankingPinned pins what a fixed query set ranks over 6,000 synthetic
// experiences (above exactScan, so the vector arm pre-selects in both
// passes): per query, unfiltered and filtered, the order of both arms'
// candidate lists (digested) and the ids Search returns. A change to the
// query path must leave it as it is; -update rewrites it when a ranking
// change is meant.
func TestRankingPinned(t *testing.T) {
	exps, qs := benchset.Synthetic(6_000, 40)
	now := func() time.Time { return benchset.RefTime }
	emb := sortedEmbedder{}
	s, err := Open(t.TempDir(), emb, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	putAll(t, s, exps)
	var out strings.Builder
	for i, bq := range qs {
		for _, filtered := range []bool{false, true} {
			q := hindsight.Query{Text: bq.Text, K: 10, NoHit: true}
			if filtered {
				q.Tool, q.ErrorCode = bq.Tool, bq.ErrorCode
			}
			knn, lex := armOrders(t, s, &q)
			res, err := s.Search(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, len(res))
			for j := range res {
				ids[j] = res[j].ID
			}
			fmt.Fprintf(&out, "q%02d filtered=%v vector=%s bm25=%s\n  %s\n", i, filtered, knn, lex, strings.Join(ids, " "))
		}
	}
	testkit.Golden(t, "testdata/ranking.golden", out.String())
}

// armOrders returns digests of the slot order of q's vector and BM25 arms
// (rank.Candidates each) with their lengths.
func armOrders(t *testing.T, s *Store, q *hindsight.Query) (knn, lex string) {
	t.Helper()
	vs, err := s.emb.Embed(context.Background(), []string{q.Text})
	if err != nil {
		t.Fatal(err)
	}
	qv := vs[0]
	normalize(qv)
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := s.idx
	f := x.compile(q, s.opt.Rank, s.now())
	sc := getScratch()
	defer putScratch(sc)
	ok := x.allow(sc, &f, x.candidates(&f))
	digest := func(l []scored) string {
		h := sha256.New()
		for _, r := range l {
			fmt.Fprintf(h, "%d,", r.slot)
		}
		return fmt.Sprintf("%d:%x", len(l), h.Sum(nil)[:8])
	}
	return digest(x.knn(sc, qv, ok, 100)), digest(x.bm25(sc, q.Text, 100))
}
