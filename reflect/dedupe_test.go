package reflect

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

func init() {
	mergeTests = append(mergeTests, struct {
		name string
		fn   func(*testing.T, backend)
	}{"CopiesMerged", mergeCopiesMerged})
}

// mergeCopiesMerged: two copies of one lesson stored as two daemons
// adding it at once would (neither saw the other's); looking for copies
// after the second merges it into the older: its evidence and tasks
// united, pinned since the older was, forgotten since the newer was
// forgotten meanwhile, the newer superseded by it.
func mergeCopiesMerged(t *testing.T, b backend) {
	ctx := context.Background()
	st := b.open(t)
	mg := &Merger{Store: st, Embedder: b.emb}
	const sit, lesson = "list_orders fails with 401 Unauthorized before login", "Call login before list_orders; without it list_orders fails with 401."
	older, newer := exp("t1", 0.7, sit, lesson, 2), exp("t2", 0.8, sit, lesson, 3)
	for i, e := range []*hindsight.Experience{&older, &newer} {
		e.ID, e.Namespace = []string{"exp_b", "exp_a"}[i], hindsight.DefaultNamespace // the older's id is the greater
		e.EvidenceCount, e.EvidenceTasks = 1, []string{e.SourceTask}
		e.CreatedAt = time.Date(2026, 12, 1, 0, 0, i, 0, time.UTC)
		e.Pinned = i == 0
		e.Deleted = i == 1
		if err := st.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := mg.dedupe(ctx, &newer)
	if err != nil || kept != "exp_b" {
		t.Fatalf("dedupe kept %q, %v; want the older exp_b", kept, err)
	}
	k, err := st.Get(ctx, hindsight.DefaultNamespace, "exp_b")
	if err != nil {
		t.Fatal(err)
	}
	if k.EvidenceCount != 2 || !slices.Equal(k.EvidenceTasks, []string{"t1", "t2"}) || !k.Pinned || !k.Deleted || k.Confidence != 0.8 {
		t.Fatalf("merged copy: evidence %d tasks %v pinned %v forgotten %v confidence %v", k.EvidenceCount, k.EvidenceTasks, k.Pinned, k.Deleted, k.Confidence)
	}
	n, err := st.Get(ctx, hindsight.DefaultNamespace, "exp_a")
	if err != nil || n.SupersededBy != "exp_b" {
		t.Fatalf("the newer copy: %+v, %v; want it superseded by exp_b", n, err)
	}
	// Done again (the other daemon saw the copies too): nothing changes.
	if _, err := mg.dedupe(ctx, &newer); err != nil {
		t.Fatal(err)
	}
	if k2, _ := st.Get(ctx, hindsight.DefaultNamespace, "exp_b"); k2.Version != k.Version || k2.EvidenceCount != 2 {
		t.Fatalf("a second merge changed the copy: version %d→%d evidence %d", k.Version, k2.Version, k2.EvidenceCount)
	}
}
