package reflect

import (
	"context"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// TestMergeNamespacesPerServer: a mapped server's lessons go to its
// namespace, the others' to the default one, each with the machine.
func TestMergeNamespacesPerServer(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	m := &Merger{Store: st, Embedder: wordEmbedder{}, Namespace: "mine",
		Namespaces: map[string]string{"shop": "team-shop"}, Machine: "host-a/00000001"}
	shared := exp("t1", 0.8, "list_orders answered 401", "When list_orders fails with 401, call login first.")
	private := exp("t1", 0.8, "notes answered 404", "When read_note fails with 404, list_notes first.")
	private.Server, private.Tool, private.ErrorCode = "notes", "read_note", "404"
	res, err := m.Merge(ctx, time.Now(), []hindsight.Experience{shared, private})
	if err != nil || len(res) != 2 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	for _, tc := range []struct{ ns, id string }{{"team-shop", res[0].ID}, {"mine", res[1].ID}} {
		e, err := st.Get(ctx, tc.ns, tc.id)
		if err != nil {
			t.Fatalf("%s not in %s: %v", tc.id, tc.ns, err)
		}
		if e.SourceMachine != "host-a/00000001" {
			t.Errorf("%s: source machine %q", tc.id, e.SourceMachine)
		}
	}
	if _, err := st.Get(ctx, "mine", res[0].ID); err == nil {
		t.Error("the shared server's lesson is also in the private namespace")
	}
	task := &hindsight.Task{Servers: []string{"notes", "shop"}}
	if got := m.namespacesOf(task); len(got) != 2 || got[0] != "mine" || got[1] != "team-shop" {
		t.Errorf("namespaces of the task = %v", got)
	}
}
