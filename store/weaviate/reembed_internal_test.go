package weaviate

import (
	"context"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestReembedKeepsConcurrentEdit: another store edits an experience after
// a re-embedding read it and before it wrote it back; the edit and the
// edits before it are kept, and the experience is found with the new
// embedder's vectors.
func TestReembedKeepsConcurrentEdit(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	old, nw := embedder.NewLocal(0), embedder.NewLocal(128)
	open := func(emb hindsight.Embedder) *Store {
		s, err := Open(ctx, Config{URL: srv.URL, GRPC: srv.GRPC, Class: "Reembed"}, emb)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(old), open(old)
	if err := a.Put(ctx, compactExp("r1")); err != nil {
		t.Fatal(err)
	}
	edit := func(task string) {
		e, err := b.Get(ctx, "team", "r1")
		if err != nil {
			t.Fatal(err)
		}
		e.EvidenceCount++
		e.EvidenceTasks = append(e.EvidenceTasks, task)
		if task == "during" {
			e.Lesson = "retry the upload in 1 MiB chunks"
		}
		if err := b.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	edit("before")
	a.afterReembedRead = func() { edit("during") }
	if err := a.Reembed(ctx, nw, nil); err != nil {
		t.Fatal(err)
	}
	g, err := open(nw).Get(ctx, "team", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if g.EvidenceCount != 2 || len(g.EvidenceTasks) != 2 || g.Lesson != "retry the upload in 1 MiB chunks" || g.Version != 3 {
		t.Fatalf("after a re-embedding raced by an edit: evidence %d tasks %v lesson %q version %d", g.EvidenceCount, g.EvidenceTasks, g.Lesson, g.Version)
	}
	if len(g.Vector) != nw.Dim() {
		t.Fatalf("vector of %d dimensions, want %d", len(g.Vector), nw.Dim())
	}
	res, err := a.Search(ctx, hindsight.Query{Namespace: "team", Text: "upload chunks", K: 1, NoHit: true})
	if err != nil || len(res) != 1 || res[0].ID != "r1" {
		t.Fatalf("search after the re-embedding: %+v, %v", res, err)
	}
}
