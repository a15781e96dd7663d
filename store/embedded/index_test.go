package embedded

import (
	"context"
	"slices"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestPreselectRecall measures how many of the exact ten nearest
// neighbours survive the binary-code pre-selection used above 4,096
// candidates, and holds it to a floor.
func TestPreselectRecall(t *testing.T) {
	exps, qs := benchset.Synthetic(12_000, 200)
	emb := embedder.NewLocal(0)
	x := newIndex(emb.Dim())
	ctx := context.Background()
	texts := make([]string, len(exps))
	for i := range exps {
		texts[i] = exps[i].Situation + "\n" + exps[i].Lesson
	}
	vs, err := emb.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	id := "hindsight-hash-v1/512"
	for i := range exps {
		e := exps[i]
		e.Vector, e.Embedder = vs[i], id
		x.add(&e, id, nil)
	}
	all := make([]int32, len(x.docs))
	for i := range all {
		all[i] = int32(i)
	}
	sc := new(scratch)
	var found, total int
	for _, q := range qs {
		qv, _ := emb.Embed(ctx, []string{q.Text})
		v := slices.Clone(qv[0])
		normalize(v)
		exact := make([]scored, 0, len(all))
		for _, s := range all {
			exact = append(exact, scored{s, x.score(v, s)})
		}
		exact = selectTop(exact, 10)
		approx := x.knn(sc, v, all, 10) // len(all) > exactScan: pre-selects
		for _, e := range exact {
			total++
			if slices.ContainsFunc(approx, func(a scored) bool { return a.slot == e.slot }) {
				found++
			}
		}
	}
	recall := float64(found) / float64(total)
	t.Logf("pre-selection recall@10 over %d experiences: %.3f", len(exps), recall)
	if recall < 0.9 {
		t.Fatalf("recall@10 = %.3f, want ≥ 0.9", recall)
	}
}
