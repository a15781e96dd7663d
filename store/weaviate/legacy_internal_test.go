package weaviate

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-openapi/strfmt"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/weaviate/weaviate/entities/models"
)

// TestEditLegacyObject: an experience stored before deltas (schema v2: a
// doc and a write token, no base) reads as it was, takes an edit, and
// another store then reads and finds the edited state.
func TestEditLegacyObject(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	emb := embedder.NewLocal(0)
	open := func() *Store {
		s, err := Open(ctx, Config{URL: srv.URL, GRPC: srv.GRPC, Class: "Legacy"}, emb)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	now := time.Now().UTC()
	e := &hindsight.Experience{ID: "l1", Namespace: hindsight.DefaultNamespace, Version: 3, Tool: "read_file",
		Situation: "read_file answered ENOENT", Lesson: "list the directory before read_file", Confidence: 0.5,
		EvidenceCount: 2, EvidenceTasks: []string{"t1", "t2"}, HitCount: 5, CreatedAt: now, UpdatedAt: now, Embedder: s.embID}
	if _, err := s.hasTenant(ctx, e.Namespace, true); err != nil {
		t.Fatal(err)
	}
	vs, err := emb.Embed(ctx, []string{store.Text(e)})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(e)
	if err := s.write(ctx, &models.Object{Class: "Legacy", ID: strfmt.UUID(objectID(e.Namespace, e.ID)), Tenant: Tenant(e.Namespace),
		Vector: vs[0], Properties: map[string]any{"doc": string(doc), "writer": "tok-v2", "base": "v2", "hid": e.ID,
			"namespace": e.Namespace, "tool": e.Tool, "superseded": false, "deleted": false,
			"lastActive": now.Unix(), "created": now.UnixNano(), "version": 3}}); err != nil {
		t.Fatal(err)
	}
	g, err := s.Get(ctx, "", "l1")
	if err != nil || g.Version != 3 || g.Lesson != e.Lesson || g.HitCount != 5 || len(g.Vector) != emb.Dim() {
		t.Fatalf("legacy object reads as %+v, %v", g, err)
	}
	g.Lesson = "call list_directory, then read_file with a listed name"
	g.EvidenceCount++
	g.EvidenceTasks = append(g.EvidenceTasks, "t3")
	g.Vector = nil
	if err := s.Put(ctx, g); err != nil || g.Version != 4 {
		t.Fatalf("edit of a legacy object: version %d, %v", g.Version, err)
	}
	if err := s.RecordHits(ctx, "", []string{"l1"}, now); err != nil {
		t.Fatal(err)
	}
	s2 := open()
	g2, err := s2.Get(ctx, "", "l1")
	if err != nil || g2.Version != 4 || g2.Lesson != g.Lesson || g2.EvidenceCount != 3 || len(g2.EvidenceTasks) != 3 || g2.HitCount != 6 {
		t.Fatalf("another store reads %+v, %v", g2, err)
	}
	res, err := s2.Search(ctx, hindsight.Query{Text: "list_directory listed name", K: 3, NoHit: true})
	if err != nil || len(res) != 1 || res[0].Lesson != g.Lesson || res[0].HitCount != 6 {
		t.Fatalf("search finds %+v, %v; want the edited view", res, err)
	}
}
