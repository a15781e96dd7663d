package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
)

func testPutGetVersion(t *testing.T, b Backend) {
	s := open(t, b)
	ctx := context.Background()
	e := exp("a1", "read_file", "ENOENT", "check the path exists with list_directory before read_file")
	put(t, s, e)
	if e.Version != 1 || e.Namespace != hindsight.DefaultNamespace || e.CreatedAt.IsZero() || e.UpdatedAt.IsZero() {
		t.Fatalf("after insert: version %d namespace %q created %v updated %v", e.Version, e.Namespace, e.CreatedAt, e.UpdatedAt)
	}
	g := get(t, s, "", "a1")
	if g.Lesson != e.Lesson || g.Tool != "read_file" || g.ErrorCode != "ENOENT" || g.Version != 1 ||
		!slices.Equal(g.SourceSteps, []int{0, 1}) || g.Confidence != 0.8 || g.SourceAgent != "test" {
		t.Fatalf("Get = %+v", g)
	}
	if len(g.Vector) != b.Embedder.Dim() || g.Embedder != store.EmbedderID(b.Embedder) {
		t.Fatalf("vector: %d dims by %q, want %d by %q", len(g.Vector), g.Embedder, b.Embedder.Dim(), store.EmbedderID(b.Embedder))
	}
	if !g.CreatedAt.Equal(e.CreatedAt) {
		t.Fatalf("created_at %v, want %v", g.CreatedAt, e.CreatedAt)
	}

	// Update from the version read.
	g.Lesson = "list the directory first, then read_file with the exact name"
	g.Vector = nil
	if err := s.Put(ctx, g); err != nil {
		t.Fatalf("update: %v", err)
	}
	if g.Version != 2 {
		t.Fatalf("version after update = %d, want 2", g.Version)
	}
	// A writer holding the old version conflicts and changes nothing.
	e.Lesson = "stale write"
	e.Vector = nil
	if err := s.Put(ctx, e); !errors.Is(err, hindsight.ErrConflict) {
		t.Fatalf("stale Put: err = %v, want ErrConflict", err)
	}
	if g2 := get(t, s, "", "a1"); g2.Lesson != g.Lesson || g2.Version != 2 || !g2.CreatedAt.Equal(e.CreatedAt) {
		t.Fatalf("after conflict: %+v", g2)
	}
	if _, err := s.Get(ctx, "", "missing"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("Get(missing): %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "other", "a1"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("Get in another namespace: %v, want ErrNotFound", err)
	}
	// An id is generated when missing.
	n := exp("", "write_file", "EACCES", "write under the allowed root")
	put(t, s, n)
	if n.ID == "" {
		t.Fatal("no id generated")
	}
	get(t, s, "", n.ID)
}

func testValidation(t *testing.T, b Backend) {
	s := open(t, b)
	ctx := context.Background()
	for _, bad := range []*hindsight.Experience{
		func() *hindsight.Experience { e := exp("v1", "t", "E", "l"); e.Confidence = 1.5; return e }(),
		func() *hindsight.Experience { e := exp("v2", "t", "E", "l"); e.Confidence = -0.1; return e }(),
		{ID: "v3", Tool: "t"},
	} {
		if err := s.Put(ctx, bad); err == nil {
			t.Errorf("Put(%+v) succeeded", bad)
		}
		if _, err := s.Get(ctx, "", bad.ID); !errors.Is(err, hindsight.ErrNotFound) {
			t.Errorf("rejected %s was stored (err %v)", bad.ID, err)
		}
	}
}

func testList(t *testing.T, b Backend) {
	s := open(t, b)
	a := exp("l1", "read_file", "ENOENT", "lesson one")
	c := exp("l2", "write_file", "EACCES", "lesson two")
	c.Server = "git"
	d := exp("l3", "read_file", "EISDIR", "lesson three")
	d.Namespace = "team-b"
	sup := exp("l4", "read_file", "ENOENT", "lesson four")
	sup.SupersededBy = "l1"
	del := exp("l5", "read_file", "ENOENT", "lesson five")
	del.Deleted = true
	put(t, s, a, c, d, sup, del)
	list := func(o hindsight.ListOptions) []string {
		t.Helper()
		es, err := s.List(context.Background(), o)
		if err != nil {
			t.Fatalf("List(%+v): %v", o, err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		opt  hindsight.ListOptions
		want []string
	}{
		{hindsight.ListOptions{}, []string{"l1", "l2", "l3"}},
		{hindsight.ListOptions{Namespace: "default"}, []string{"l1", "l2"}},
		{hindsight.ListOptions{Namespace: "team-b"}, []string{"l3"}},
		{hindsight.ListOptions{Server: "git"}, []string{"l2"}},
		{hindsight.ListOptions{Tool: "read_file"}, []string{"l1", "l3"}},
		{hindsight.ListOptions{IncludeSuperseded: true, Namespace: "default"}, []string{"l1", "l2", "l4"}},
		{hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true}, []string{"l1", "l2", "l3", "l4", "l5"}},
	} {
		if got := list(tc.opt); !slices.Equal(got, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.opt, got, tc.want)
		}
	}
	if got := list(hindsight.ListOptions{Limit: 2}); len(got) != 2 {
		t.Errorf("List(limit 2) returned %d", len(got))
	}
}

func testSupersede(t *testing.T, b Backend) {
	s := open(t, b)
	old := exp("old", "fetch", "429", "retry fetch immediately when rate limited")
	put(t, s, old)
	nw := exp("new", "fetch", "429", "wait for the Retry-After header before retrying fetch when rate limited")
	put(t, s, nw)
	old.SupersededBy = "new"
	old.Vector = nil
	put(t, s, old)
	q := hindsight.Query{Text: "fetch rate limited 429 retry", K: 10}
	if got := search(t, s, q); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("search = %v, want [new]", got)
	}
	q.IncludeSuperseded = true
	if got := search(t, s, q); len(got) != 2 {
		t.Fatalf("search with superseded = %v, want both", got)
	}
	if g := get(t, s, "", "old"); g.SupersededBy != "new" || g.Lesson != "retry fetch immediately when rate limited" {
		t.Fatalf("old = %+v", g)
	}
}

func testForgetRestore(t *testing.T, b Backend) {
	s := open(t, b)
	e := exp("f1", "git_push", "403", "use the deploy key for git_push to the release remote")
	put(t, s, e)
	q := hindsight.Query{Text: "git_push 403 deploy key", K: 5}
	if got := search(t, s, q); !slices.Equal(got, []string{"f1"}) {
		t.Fatalf("before forget: %v", got)
	}
	e.Deleted, e.Vector = true, nil
	put(t, s, e)
	if got := search(t, s, q); len(got) != 0 {
		t.Fatalf("forgotten experience found: %v", got)
	}
	if g := get(t, s, "", "f1"); !g.Deleted {
		t.Fatal("forgotten experience lost its deleted flag")
	}
	q2 := q
	q2.IncludeDeleted = true
	if got := search(t, s, q2); !slices.Equal(got, []string{"f1"}) {
		t.Fatalf("IncludeDeleted: %v", got)
	}
	e.Deleted = false
	put(t, s, e)
	if got := search(t, s, q); !slices.Equal(got, []string{"f1"}) {
		t.Fatalf("after restore: %v", got)
	}
	if e.Version != 3 {
		t.Fatalf("version after forget and restore = %d, want 3", e.Version)
	}
}

func testHits(t *testing.T, b Backend) {
	s := open(t, b)
	ctx := context.Background()
	put(t, s, corpus()...)
	before := time.Now().Add(-time.Second)
	res, err := s.Search(ctx, hindsight.Query{Text: "git_commit user.email", Tool: "git_commit", K: 1})
	if err != nil || len(res) != 1 || res[0].ID != "c4" {
		t.Fatalf("search = %v, %v", res, err)
	}
	g := get(t, s, "", "c4")
	if g.HitCount != 1 || g.LastHitAt == nil || g.LastHitAt.Before(before) {
		t.Fatalf("after a hit: count %d last %v", g.HitCount, g.LastHitAt)
	}
	if _, err := s.Search(ctx, hindsight.Query{Text: "git_commit user.email", K: 1, NoHit: true}); err != nil {
		t.Fatal(err)
	}
	if g := get(t, s, "", "c4"); g.HitCount != 1 {
		t.Fatalf("NoHit query counted: %d", g.HitCount)
	}
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	if err := s.RecordHits(ctx, "", []string{"c4", "c5", "missing"}, at); err != nil {
		t.Fatalf("RecordHits: %v", err)
	}
	if g := get(t, s, "", "c4"); g.HitCount != 2 || g.LastHitAt == nil || !g.LastHitAt.Equal(at) {
		t.Fatalf("after RecordHits: count %d last %v, want 2 at %v", g.HitCount, g.LastHitAt, at)
	}
	if g := get(t, s, "", "c5"); g.HitCount != 1 {
		t.Fatalf("c5 hit count %d", g.HitCount)
	}
}

// testPurge: a purged experience is gone in every state and from search
// (also after a restart); its neighbours, one whose id extends its id
// among them, and other namespaces keep theirs. Every backend must be a
// store.Purger.
func testPurge(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.New(t)
	p, ok := s.(store.Purger)
	if !ok {
		s.Close()
		t.Fatalf("%T does not implement store.Purger", s)
	}
	secret := exp("p1", "read_file", "ENOENT", "purge me: token zq9secretzq9")
	neighbour := exp("p10", "read_file", "ENOENT", "keep me: a lesson whose id extends p1")
	other := exp("p1", "read_file", "ENOENT", "keep me: same id, other namespace")
	other.Namespace = "team-y"
	forgotten := exp("p2", "write_file", "EACCES", "purge me too, though forgotten")
	forgotten.Deleted = true
	put(t, s, secret, neighbour, other, forgotten)
	n, err := p.Purge(ctx, "", []string{"p1", "p2", "no-such-id"})
	if err != nil || n != 2 {
		s.Close()
		t.Fatalf("Purge = %d, %v; want 2 removed", n, err)
	}
	check := func(s hindsight.ExperienceStore) {
		t.Helper()
		for _, id := range []string{"p1", "p2"} {
			if _, err := s.Get(ctx, "", id); !errors.Is(err, hindsight.ErrNotFound) {
				t.Errorf("Get(%s) after purge: %v, want ErrNotFound", id, err)
			}
		}
		all, err := s.List(ctx, hindsight.ListOptions{IncludeDeleted: true, IncludeSuperseded: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range all {
			got = append(got, e.Namespace+"/"+e.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"default/p10", "team-y/p1"}) {
			t.Errorf("List after purge = %v", got)
		}
		if got := search(t, s, hindsight.Query{Text: "purge me token zq9secretzq9", K: 5, IncludeDeleted: true}); slices.Contains(got, "p1") || slices.Contains(got, "p2") {
			t.Errorf("search finds purged experiences: %v", got)
		}
		if g := get(t, s, "team-y", "p1"); g.Lesson != other.Lesson {
			t.Errorf("the other namespace's p1 changed: %q", g.Lesson)
		}
		if g := get(t, s, "", "p10"); g.Lesson != neighbour.Lesson || len(g.Vector) != b.Embedder.Dim() {
			t.Errorf("p10 after purge: %q, %d dims", g.Lesson, len(g.Vector))
		}
	}
	check(s)
	if n, err := p.Purge(ctx, "", []string{"p1"}); err != nil || n != 0 {
		t.Errorf("purging again = %d, %v; want 0, nil", n, err)
	}
	s = b.Reopen(t, s)
	t.Cleanup(func() { s.Close() })
	check(s)
	put(t, s, exp("p1", "read_file", "ENOENT", "a new p1 after the purge"))
}
