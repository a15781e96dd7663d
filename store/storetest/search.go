package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
)

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
