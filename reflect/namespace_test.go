package reflect

import (
	"context"
	"slices"
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

// TestNamespaceInFromSteps: a lesson goes to the namespace its cited
// steps' sidecar named (--namespace), else to one its server's steps
// carry, else to the configured one; the task's namespaces include them.
func TestNamespaceInFromSteps(t *testing.T) {
	m := &Merger{Namespace: "mine", Namespaces: map[string]string{"notes": "team-notes"}}
	task := &hindsight.Task{Servers: []string{"shop", "notes"}, Steps: []hindsight.Step{
		{StepIndex: 0, Server: "shop", Namespace: "team-shop"},
		{StepIndex: 1, Server: "notes"},
		{StepIndex: 2, Server: "shop"},
		{StepIndex: 3, Server: "notes", Namespace: "elsewhere"},
	}}
	for _, tc := range []struct {
		server string
		steps  []int
		want   string
	}{
		{"shop", []int{0}, "team-shop"},
		{"shop", []int{2}, "team-shop"},  // no namespace on the cited step: its server's
		{"notes", []int{1}, "elsewhere"}, // a sidecar of notes named one
		{"notes", []int{3}, "elsewhere"},
		{"mail", []int{}, "mine"},
	} {
		e := &hindsight.Experience{Server: tc.server, SourceSteps: tc.steps}
		if got := m.namespaceIn(task, e); got != tc.want {
			t.Errorf("namespaceIn(%s %v) = %q, want %q", tc.server, tc.steps, got, tc.want)
		}
	}
	plain := &hindsight.Task{Servers: []string{"notes"}, Steps: []hindsight.Step{{StepIndex: 0, Server: "notes"}}}
	if got := m.namespaceIn(plain, &hindsight.Experience{Server: "notes", SourceSteps: []int{0}}); got != "team-notes" {
		t.Errorf("without --namespace: %q, want the configured team-notes", got)
	}
	if got := m.namespacesOf(task); !slices.Equal(got, []string{"mine", "team-notes", "team-shop", "elsewhere"}) {
		t.Errorf("namespaces of the task = %v", got)
	}
}
