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
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
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

// corpus is a small set with overlapping tools, servers and error codes.
func corpus() []*hindsight.Experience {
	mk := func(id, server, tool, task, code, lesson string) *hindsight.Experience {
		e := exp(id, tool, code, lesson)
		e.Server, e.TaskType = server, task
		return e
	}
	return []*hindsight.Experience{
		mk("c1", "fs", "read_file", "edit", "ENOENT", "when read_file says ENOENT list the parent directory and retry with the exact file name"),
		mk("c2", "fs", "read_file", "edit", "EACCES", "when read_file is denied stay inside the allowed directories"),
		mk("c3", "fs", "write_file", "edit", "ENOENT", "create the parent directory before write_file into a new folder"),
		mk("c4", "git", "git_commit", "release", "EPERM", "configure user.email before git_commit"),
		mk("c5", "http", "fetch", "research", "429", "back off for the Retry-After seconds when fetch gets 429"),
		mk("c6", "http", "fetch", "research", "timeout", "lower the page size when fetch times out on large documents"),
	}
}

func testSearchFilters(t *testing.T, b Backend) {
	s := open(t, b)
	put(t, s, corpus()...)
	q := "read_file failed ENOENT missing file directory"
	for _, tc := range []struct {
		name string
		q    hindsight.Query
		want []string // exactly these, in any order (nil: none)
		top  string   // expected first result, if set
	}{
		{name: "text", q: hindsight.Query{Text: q, K: 10}, top: "c1"},
		{name: "server", q: hindsight.Query{Text: q, Server: "http", K: 10}, want: []string{"c5", "c6"}},
		{name: "tool", q: hindsight.Query{Text: q, Tool: "read_file", K: 10}, want: []string{"c1", "c2"}, top: "c1"},
		{name: "task type", q: hindsight.Query{Text: q, TaskType: "release", K: 10}, want: []string{"c4"}},
		{name: "error code", q: hindsight.Query{Text: q, ErrorCode: "ENOENT", K: 10}, want: []string{"c1", "c3"}, top: "c1"},
		{name: "tool and code", q: hindsight.Query{Text: q, Tool: "write_file", ErrorCode: "ENOENT", K: 10}, want: []string{"c3"}},
		{name: "unknown tool", q: hindsight.Query{Text: q, Tool: "nope", K: 10}},
		{name: "unknown namespace", q: hindsight.Query{Text: q, Namespace: "nobody", K: 10}},
		{name: "k", q: hindsight.Query{Text: "directory", K: 1}},
		{name: "no text, filtered", q: hindsight.Query{Server: "http", K: 10}, want: []string{"c5", "c6"}, top: "c6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := search(t, s, tc.q)
			if tc.name == "k" {
				if len(got) != 1 {
					t.Fatalf("K=1 returned %v", got)
				}
				return
			}
			if tc.want != nil || tc.top == "" {
				g := slices.Clone(got)
				slices.Sort(g)
				if !slices.Equal(g, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
			if tc.top != "" && (len(got) == 0 || got[0] != tc.top) {
				t.Fatalf("got %v, want %s first", got, tc.top)
			}
		})
	}
}

func testNamespaceIsolation(t *testing.T, b Backend) {
	s := open(t, b)
	a := exp("same", "read_file", "ENOENT", "team A: list the directory before read_file")
	a.Namespace = "team-a"
	bb := exp("same", "read_file", "ENOENT", "team B: use the absolute path with read_file")
	bb.Namespace = "team-b"
	only := exp("only-b", "read_file", "ENOENT", "team B secret lesson about read_file")
	only.Namespace = "team-b"
	put(t, s, a, bb, only)
	if g := get(t, s, "team-a", "same"); g.Lesson != a.Lesson {
		t.Fatalf("team-a got %q", g.Lesson)
	}
	if g := get(t, s, "team-b", "same"); g.Lesson != bb.Lesson {
		t.Fatalf("team-b got %q", g.Lesson)
	}
	res, err := s.Search(context.Background(), hindsight.Query{Text: "team B secret lesson read_file", Namespace: "team-a", K: 10, NoHit: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Namespace != "team-a" || r.Lesson != a.Lesson {
			t.Fatalf("team-a search returned %s/%s %q", r.Namespace, r.ID, r.Lesson)
		}
	}
	if len(res) != 1 {
		t.Fatalf("team-a search returned %d results, want 1", len(res))
	}
	if got := search(t, s, hindsight.Query{Text: "read_file", Namespace: "team-b", K: 10}); len(got) != 2 {
		t.Fatalf("team-b search = %v, want 2 results", got)
	}
	if got := search(t, s, hindsight.Query{Text: "read_file", K: 10}); len(got) != 0 {
		t.Fatalf("default namespace search = %v, want none", got)
	}
	// Hits are recorded per namespace.
	if err := s.RecordHits(context.Background(), "team-a", []string{"same"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if g := get(t, s, "team-b", "same"); g.HitCount != 0 {
		t.Fatalf("hit in team-a counted in team-b: %d", g.HitCount)
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

func testCold(t *testing.T, b Backend) {
	s := open(t, b)
	ctx := context.Background()
	now := time.Now().UTC()
	cold := exp("cold", "deploy", "E42", "run the deploy dry-run before the real deploy")
	cold.CreatedAt = now.Add(-200 * 24 * time.Hour)
	stale := exp("stale", "deploy", "E43", "pin the deploy region for deploy E43 errors")
	stale.CreatedAt = now.Add(-100 * 24 * time.Hour)
	put(t, s, cold, stale)
	q := hindsight.Query{Text: "deploy dry-run E42 region", K: 10, Explain: true, NoHit: true}
	res, err := s.Search(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(res); !slices.Equal(got, []string{"stale"}) {
		t.Fatalf("hot search = %v, want [stale]", got)
	}
	if res[0].Explain == nil || res[0].Explain.Cold != rank.StaleWeight {
		t.Fatalf("stale experience explain = %+v, want the stale weight", res[0].Explain)
	}
	q.IncludeCold = true
	res, err = s.Search(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range res {
		if r.ID == "cold" {
			found = true
			if r.Explain == nil || r.Explain.Cold != rank.ColdWeight {
				t.Fatalf("cold explain = %+v", r.Explain)
			}
		}
	}
	if !found {
		t.Fatalf("IncludeCold search = %v, want cold among them", ids(res))
	}
	// Kept: Get and List still see it; a hit brings it back.
	get(t, s, "", "cold")
	if err := s.RecordHits(ctx, "", []string{"cold"}, now); err != nil {
		t.Fatal(err)
	}
	q.IncludeCold = false
	if got := search(t, s, q); !slices.Contains(got, "cold") {
		t.Fatalf("after a hit the experience is still cold: %v", got)
	}
}

func testExplain(t *testing.T, b Backend) {
	s := open(t, b)
	hi := exp("hi", "query_db", "TIMEOUT", "add a LIMIT clause when query_db times out")
	lo := exp("lo", "query_db", "TIMEOUT", "add a LIMIT clause when query_db times out")
	hi.Confidence, lo.Confidence = 0.95, 0.2
	other := exp("other", "send_mail", "550", "verify the recipient domain before send_mail")
	put(t, s, lo, hi, other)
	res, err := s.Search(context.Background(), hindsight.Query{Text: "query_db timed out LIMIT", K: 3, Explain: true, NoHit: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) < 2 || res[0].ID != "hi" || res[1].ID != "lo" {
		t.Fatalf("order = %v, want hi, lo first", ids(res))
	}
	for i, r := range res {
		ex := r.Explain
		if ex == nil {
			t.Fatalf("%s: no explain", r.ID)
		}
		if ex.RRF <= 0 || ex.Confidence <= 0 || ex.Recency <= 0 || ex.Evidence <= 0 || ex.Hits <= 0 || ex.Cold != 1 {
			t.Fatalf("%s: explain %+v", r.ID, ex)
		}
		if i > 0 && r.Score > res[i-1].Score {
			t.Fatalf("scores not descending: %v", res)
		}
	}
	if ex := res[0].Explain; ex.BM25Rank == 0 || ex.VectorRank == 0 {
		t.Fatalf("best match explain %+v: want both ranks", ex)
	}
	if res[0].Explain.Confidence <= res[1].Explain.Confidence {
		t.Fatalf("confidence weights %v <= %v", res[0].Explain.Confidence, res[1].Explain.Confidence)
	}
	res, err = s.Search(context.Background(), hindsight.Query{Text: "query_db", K: 3, NoHit: true})
	if err != nil || len(res) == 0 || res[0].Explain != nil {
		t.Fatalf("explain filled without Explain: %v %v", res, err)
	}
}

func testCJK(t *testing.T, b Backend) {
	s := open(t, b)
	zh := exp("zh", "read_file", "ENOENT", "读取文件失败时，先列出目录确认文件名，再用完整路径重试")
	zh.Situation = "读取配置文件时报错：文件不存在"
	en := exp("en", "read_file", "ENOENT", "list the directory before retrying read_file")
	put(t, s, zh, en)
	got := search(t, s, hindsight.Query{Text: "配置文件不存在", K: 2})
	if len(got) == 0 || got[0] != "zh" {
		t.Fatalf("Chinese query = %v, want zh first", got)
	}
}

func testRestart(t *testing.T, b Backend) {
	s := b.New(t)
	es := corpus()
	put(t, s, es...)
	es[0].Lesson += " (updated)"
	es[0].Vector = nil
	put(t, s, es[0])
	es[1].Deleted, es[1].Vector = true, nil
	put(t, s, es[1])
	ns := exp("ns", "read_file", "ENOENT", "namespaced lesson")
	ns.Namespace = "team-x"
	put(t, s, ns)
	if err := s.RecordHits(context.Background(), "", []string{"c4"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	t.Cleanup(func() { s.Close() })
	g := get(t, s, "", "c1")
	if g.Version != 2 || g.Lesson != es[0].Lesson || len(g.Vector) != b.Embedder.Dim() {
		t.Fatalf("after restart c1 = version %d lesson %q, %d dims", g.Version, g.Lesson, len(g.Vector))
	}
	if g := get(t, s, "", "c2"); !g.Deleted {
		t.Fatal("deleted flag lost in restart")
	}
	if g := get(t, s, "", "c4"); g.HitCount != 1 {
		t.Fatalf("hit count after restart = %d", g.HitCount)
	}
	if got := search(t, s, hindsight.Query{Text: "read_file ENOENT list the parent directory", Tool: "read_file", K: 5}); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("search after restart = %v, want [c1]", got)
	}
	if got := search(t, s, hindsight.Query{Text: "namespaced lesson", Namespace: "team-x", K: 5}); !slices.Equal(got, []string{"ns"}) {
		t.Fatalf("namespaced search after restart = %v", got)
	}
	// Writes continue from the stored version.
	g.Lesson += " again"
	g.Vector = nil
	if err := s.Put(context.Background(), g); err != nil || g.Version != 3 {
		t.Fatalf("put after restart: version %d err %v", g.Version, err)
	}
}

func testDimension(t *testing.T, b Backend) {
	s := open(t, b)
	ctx := context.Background()
	dim := b.Embedder.Dim()
	e := exp("d1", "t", "E", "lesson")
	e.Vector = make([]float32, dim+1)
	e.Vector[0] = 1
	if err := s.Put(ctx, e); !errors.Is(err, store.ErrDimension) {
		t.Fatalf("Put with %d dims: %v, want ErrDimension", dim+1, err)
	}
	e.Vector = make([]float32, dim)
	e.Vector[0] = 1
	e.Embedder = "some-other-model/" + fmt.Sprint(dim)
	if err := s.Put(ctx, e); !errors.Is(err, store.ErrDimension) {
		t.Fatalf("Put with another embedder's vector: %v, want ErrDimension", err)
	}
	if _, err := s.Get(ctx, "", "d1"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("refused experience stored: %v", err)
	}
	// The store's own embedder's vector is accepted.
	vs, err := b.Embedder.Embed(ctx, []string{store.Text(e)})
	if err != nil {
		t.Fatal(err)
	}
	e.Vector, e.Embedder = vs[0], store.EmbedderID(b.Embedder)
	put(t, s, e)
}

func testFindSimilar(t *testing.T, b Backend) {
	s := open(t, b)
	ctx := context.Background()
	put(t, s, corpus()...)
	dup := exp("dup", "read_file", "ENOENT", "when read_file says ENOENT list the parent directory and retry with the exact file name")
	dup.Situation = corpus()[0].Situation
	dup.Namespace = hindsight.DefaultNamespace
	got, err := store.FindSimilar(ctx, s, b.Embedder, dup, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "c1" || got[0].Score < store.DefaultDuplicateThreshold {
		t.Fatalf("FindSimilar = %v", got)
	}
	unrelated := exp("u", "render", "E1", "render charts with the svg backend for long documents")
	if got, err := store.FindSimilar(ctx, s, b.Embedder, unrelated, 0); err != nil || len(got) != 0 {
		t.Fatalf("FindSimilar(unrelated) = %v, %v", got, err)
	}
}

// testConcurrent writes, updates and searches from several goroutines; run
// with -race. Every write lands, and concurrent updates of one experience
// either succeed with consecutive versions or fail with ErrConflict.
func testConcurrent(t *testing.T, b Backend) {
	s := open(t, b)
	ctx := context.Background()
	shared := exp("shared", "fetch", "429", "back off when rate limited")
	put(t, s, shared)
	const workers, each = 4, 5
	var wg sync.WaitGroup
	var okUpdates atomic.Int32
	errs := make(chan error, workers*each*3)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e := exp(fmt.Sprintf("w%d-%d", w, i), "read_file", "ENOENT", fmt.Sprintf("lesson %d of worker %d", i, w))
				if err := s.Put(ctx, e); err != nil {
					errs <- err
				}
				if _, err := s.Search(ctx, hindsight.Query{Text: "lesson worker read_file", K: 3}); err != nil {
					errs <- err
				}
				g, err := s.Get(ctx, "", "shared")
				if err != nil {
					errs <- err
					continue
				}
				g.Vector = nil
				g.Confidence = float64(w) / 10
				switch err := s.Put(ctx, g); {
				case err == nil:
					okUpdates.Add(1)
				case !errors.Is(err, hindsight.ErrConflict):
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	all, err := s.List(ctx, hindsight.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != workers*each+1 {
		t.Fatalf("List = %d experiences, want %d", len(all), workers*each+1)
	}
	if g := get(t, s, "", "shared"); g.Version != 1+int(okUpdates.Load()) {
		t.Fatalf("shared version %d after %d successful updates", g.Version, okUpdates.Load())
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
