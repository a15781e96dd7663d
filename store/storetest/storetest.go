// Package storetest is the conformance suite every hindsight.ExperienceStore
// backend passes: writes and versions, listing, search with each filter,
// namespace (tenant) isolation, supersede, forget and restore, hit
// recording, the cold index, restarts, refusal to mix vector dimensions and
// purge (every backend implements store.Purger).
//
// A backend's test calls Run with a Backend:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Backend{New: ..., Reopen: ..., Embedder: emb})
//	}
package storetest

import (
	"context"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// Backend opens stores of the backend under test.
type Backend struct {
	// New returns a new, empty store. The suite closes it (through
	// t.Cleanup or Reopen); New may register its own cleanups.
	New func(t *testing.T) hindsight.ExperienceStore
	// Reopen closes s and opens a store over the same data, as a daemon
	// restart would.
	Reopen func(t *testing.T, s hindsight.ExperienceStore) hindsight.ExperienceStore
	// Embedder is the embedder the stores use.
	Embedder hindsight.Embedder
}

// Run runs the suite.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"PutGetVersion", testPutGetVersion},
		{"Validation", testValidation},
		{"List", testList},
		{"SearchFilters", testSearchFilters},
		{"NamespaceIsolation", testNamespaceIsolation},
		{"Supersede", testSupersede},
		{"ForgetRestore", testForgetRestore},
		{"Hits", testHits},
		{"ColdIndex", testCold},
		{"ExplainAndOrder", testExplain},
		{"CJK", testCJK},
		{"Restart", testRestart},
		{"DimensionMixingRefused", testDimension},
		{"FindSimilar", testFindSimilar},
		{"Concurrent", testConcurrent},
		{"Purge", testPurge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, b) })
	}
}

func open(t *testing.T, b Backend) hindsight.ExperienceStore {
	t.Helper()
	s := b.New(t)
	t.Cleanup(func() { s.Close() })
	return s
}

// exp returns a valid experience with distinct text.
func exp(id, tool, code, lesson string) *hindsight.Experience {
	return &hindsight.Experience{
		ID: id, Server: "fs", Tool: tool, TaskType: "edit", ErrorCode: code,
		Situation: "calling " + tool + " failed with " + code,
		Action:    "retried " + tool,
		Result:    "it worked after the change",
		Lesson:    lesson, Confidence: 0.8, EvidenceCount: 1,
		SourceTask: "task-" + id, SourceSteps: []int{0, 1}, SourceAgent: "test",
	}
}

func put(t *testing.T, s hindsight.ExperienceStore, es ...*hindsight.Experience) {
	t.Helper()
	for _, e := range es {
		if err := s.Put(context.Background(), e); err != nil {
			t.Fatalf("Put(%s): %v", e.ID, err)
		}
	}
}

func search(t *testing.T, s hindsight.ExperienceStore, q hindsight.Query) []string {
	t.Helper()
	q.NoHit = true
	res, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%+v): %v", q, err)
	}
	return ids(res)
}

func ids(res []hindsight.ScoredExperience) []string {
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.ID
	}
	return out
}

func get(t *testing.T, s hindsight.ExperienceStore, ns, id string) *hindsight.Experience {
	t.Helper()
	e, err := s.Get(context.Background(), ns, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", ns, id, err)
	}
	return e
}
