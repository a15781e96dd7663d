package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/storetest"
)

func TestConformance(t *testing.T) {
	emb := embedder.NewLocal(0)
	dirs := map[hindsight.ExperienceStore]string{}
	storetest.Run(t, storetest.Backend{
		Embedder: emb,
		New: func(t *testing.T) hindsight.ExperienceStore {
			dir := t.TempDir()
			s, err := embedded.Open(dir, emb, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dirs[s] = dir
			return s
		},
		Reopen: func(t *testing.T, s hindsight.ExperienceStore) hindsight.ExperienceStore {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			n, err := embedded.Open(dirs[s], emb, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			dirs[n] = dirs[s]
			return n
		},
	})
}

// TestReembed changes the embedder: the store opens, finds old experiences
// by text only, refuses vectors of the old embedder, and after Reembed
// finds them by vector again; the new vectors survive a restart.
func TestReembed(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	old := embedder.NewLocal(256)
	s, err := embedded.Open(dir, old, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		e := &hindsight.Experience{ID: fmt.Sprintf("e%d", i), Tool: "read_file", ErrorCode: "ENOENT",
			Situation: fmt.Sprintf("reading file number %d failed", i), Lesson: "list the directory first", Confidence: 0.8}
		if err := s.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	nw := embedder.NewLocal(512)
	s, err = embedded.Open(dir, nw, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.NeedsReembed(); n != 10 {
		t.Fatalf("NeedsReembed = %d, want 10", n)
	}
	res, err := s.Search(ctx, hindsight.Query{Text: "reading file number 3", K: 1, NoHit: true, Explain: true})
	if err != nil || len(res) != 1 || res[0].ID != "e3" || res[0].Explain.VectorRank != 0 {
		t.Fatalf("lexical search before re-embedding: %+v %v", res, err)
	}
	// An old-embedder vector is refused.
	g, _ := s.Get(ctx, "", "e3")
	g.Vector = make([]float32, 256)
	g.Embedder = store.EmbedderID(old)
	if err := s.Put(ctx, g); !errors.Is(err, store.ErrDimension) {
		t.Fatalf("old vector accepted: %v", err)
	}
	var calls, last int
	if err := s.Reembed(ctx, nw, func(done, total int) { calls++; last = done; _ = total }); err != nil {
		t.Fatal(err)
	}
	if calls == 0 || last != 10 || s.NeedsReembed() != 0 {
		t.Fatalf("progress calls %d last %d, still stale %d", calls, last, s.NeedsReembed())
	}
	s.Close()
	s, err = embedded.Open(dir, nw, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := s.NeedsReembed(); n != 0 {
		t.Fatalf("after restart %d need re-embedding", n)
	}
	res, err = s.Search(ctx, hindsight.Query{Text: "reading file number 3", K: 1, NoHit: true, Explain: true})
	if err != nil || len(res) != 1 || res[0].ID != "e3" || res[0].Explain.VectorRank == 0 {
		t.Fatalf("search after re-embedding: %+v %v", res, err)
	}
	if g, _ := s.Get(ctx, "", "e3"); len(g.Vector) != 512 || g.Embedder != store.EmbedderID(nw) {
		t.Fatalf("e3 vector %d dims by %q", len(g.Vector), g.Embedder)
	}
}

// TestCount checks Count against a list of every experience, in two
// namespaces, with deleted, superseded and both; and that List stops
// when its context ends.
func TestCount(t *testing.T) {
	s, err := embedded.Open(t.TempDir(), embedder.NewLocal(0), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 40 {
		e := &hindsight.Experience{ID: fmt.Sprintf("c%02d", i), Namespace: []string{"", "team"}[i%2],
			Situation: fmt.Sprintf("situation %d", i), Lesson: "lesson"}
		e.Deleted = i%5 == 0
		if i%3 == 0 {
			e.SupersededBy = "c39"
		}
		if err := s.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.List(ctx, hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true})
	if err != nil {
		t.Fatal(err)
	}
	var deleted, superseded int
	for _, e := range all {
		switch {
		case e.Deleted:
			deleted++
		case e.SupersededBy != "":
			superseded++
		}
	}
	total, d, sup := s.Count()
	if total != len(all) || d != deleted || sup != superseded || total != 40 || d != 8 || sup != 11 {
		t.Fatalf("Count: %d, %d deleted, %d superseded; the list: %d, %d, %d; want 40, 8, 11", total, d, sup, len(all), deleted, superseded)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.List(done, hindsight.ListOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("List with an ended context: %v; want context.Canceled", err)
	}
}
