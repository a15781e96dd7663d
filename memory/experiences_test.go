package memory

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestLearntFrom: the experiences of the tasks named, in what the list
// options select (a forgotten one only when they include the deleted),
// without their vectors; with no store, ErrUnavailable.
func TestLearntFrom(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedder.NewLocal(0), embedded.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, e := range []hindsight.Experience{
		{ID: "a", SourceTask: "t1", Lesson: "Call login before list_orders.", Situation: "list_orders failed", Confidence: 0.8},
		{ID: "b", SourceTask: "t2", Lesson: "Pass month as YYYY-MM to fetch_report.", Situation: "fetch_report failed", Confidence: 0.8},
		{ID: "c", SourceTask: "t1", Lesson: "Call read_file with an absolute path.", Situation: "read_file failed", Confidence: 0.8, Deleted: true},
		{ID: "d", SourceTask: "t3", Lesson: "Call list_directory before read_file.", Situation: "read_file failed", Confidence: 0.8},
	} {
		if err := st.Put(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	svc := &Service{Store: st, Logger: quiet}
	ids := func(list []hindsight.Experience) []string {
		var out []string
		for _, e := range list {
			if e.Vector != nil {
				t.Errorf("%s keeps its vector", e.ID)
			}
			out = append(out, e.ID)
		}
		slices.Sort(out)
		return out
	}
	got, err := svc.LearntFrom(ctx, hindsight.ListOptions{}, "t1", "t2")
	if err != nil || !slices.Equal(ids(got), []string{"a", "b"}) {
		t.Errorf("active experiences of t1 and t2: %v, %v; want a, b", ids(got), err)
	}
	got, err = svc.LearntFrom(ctx, hindsight.ListOptions{IncludeDeleted: true}, "t1")
	if err != nil || !slices.Equal(ids(got), []string{"a", "c"}) {
		t.Errorf("every experience of t1: %v, %v; want a, c", ids(got), err)
	}
	if _, err := (&Service{Logger: quiet}).LearntFrom(ctx, hindsight.ListOptions{}, "t1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("without a store: %v, want ErrUnavailable", err)
	}
}
