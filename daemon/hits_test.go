package daemon

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// countingTransport counts the requests it carries.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSearchRoundTripsFlat: a counted search through the daemon costs the
// same requests to a real Weaviate at k = 1 and k = 3 (its hits wait in
// memory); reads through the daemon show them at once, and they reach
// the store at the next flush.
func TestSearchRoundTripsFlat(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	rt := &countingTransport{}
	st, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, Class: "RoundTrips", HTTPClient: &http.Client{Transport: rt}}, embedder.NewLocal(0))
	if err != nil {
		t.Fatal(err)
	}
	var exps []*hindsight.Experience
	for _, id := range []string{"r1", "r2", "r3"} {
		exps = append(exps, &hindsight.Experience{ID: id, Server: "files", Tool: "upload", Situation: "the gateway answered 413 " + id,
			Lesson: "retry the upload with a smaller chunk size " + id, Confidence: 0.8, SourceTask: "task-" + id})
	}
	if err := st.Import(ctx, exps); err != nil {
		t.Fatal(err)
	}
	d := &Server{Store: st, StoreName: "weaviate", HitFlush: time.Hour}
	c := startServer(t, d)
	search := func(k int) int64 {
		t.Helper()
		before := rt.n.Load()
		res, err := c.Search(ctx, hindsight.Query{Text: "upload gateway 413 chunk size", K: k})
		if err != nil || len(res) != k {
			t.Fatalf("search at k=%d: %d results, %v", k, len(res), err)
		}
		return rt.n.Load() - before
	}
	search(1) // the tenant is looked up once
	one, three := search(1), search(3)
	t.Logf("requests to Weaviate per counted search: %d at k=1, %d at k=3", one, three)
	if one != three {
		t.Fatalf("a counted search costs %d requests at k=1 and %d at k=3", one, three)
	}
	e, err := c.Experience(ctx, "", "r1")
	if err != nil || e.HitCount != 3 {
		t.Fatalf("read through the daemon before the flush: %+v, %v; want 3 hits", e, err)
	}
	d.mem.FlushHits(ctx)
	g, err := st.Get(ctx, "", "r1")
	if err != nil || g.HitCount != 3 || g.LastHitAt == nil {
		t.Fatalf("store after the flush: %+v, %v; want 3 hits", g, err)
	}
	if e, err := c.Experience(ctx, "", "r1"); err != nil || e.HitCount != 3 {
		t.Fatalf("read through the daemon after the flush: %+v, %v; want 3 hits, counted once", e, err)
	}
}

// TestReimportKeepsLocalState: a pack imported again with a new text
// replaces the lesson's text but keeps what was done to it here: its pin
// and evidence, on the embedded store and on Weaviate (where the import
// is written as one that gives way to edits).
func TestReimportKeepsLocalState(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	wst, err := weaviate.Open(ctx, weaviate.Config{URL: srv.URL, GRPC: srv.GRPC, Class: "Reimport"}, embedder.NewLocal(0))
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for name, st := range map[string]hindsight.ExperienceStore{"embedded": openEmbedded(t), "weaviate": wst} {
		t.Run(name, func(t *testing.T) {
			c := startServer(t, &Server{Store: st, StoreName: name})
			if _, err := c.Import(ctx, strings.NewReader(tasktest.ExperienceLine("p1", "read_file", "Call read_file with an absolute path.", day))); err != nil {
				t.Fatal(err)
			}
			e, err := st.Get(ctx, "default", "p1")
			if err != nil {
				t.Fatal(err)
			}
			e.Pinned, e.EvidenceCount, e.EvidenceTasks = true, e.EvidenceCount+1, append(e.EvidenceTasks, "local-task")
			if err := st.Put(ctx, e); err != nil {
				t.Fatal(err)
			}
			res, err := c.Import(ctx, strings.NewReader(tasktest.ExperienceLine("p1", "read_file", "Call read_file with an absolute path under /data.", day)))
			if err != nil || res.Updated != 1 {
				t.Fatalf("re-import: %+v, %v", res, err)
			}
			g, err := c.Experience(ctx, "default", "p1")
			if err != nil {
				t.Fatal(err)
			}
			if !g.Pinned || g.EvidenceCount != e.EvidenceCount || !strings.Contains(g.Lesson, "/data") {
				t.Fatalf("after the re-import: pinned %v evidence %d (want %d) lesson %q", g.Pinned, g.EvidenceCount, e.EvidenceCount, g.Lesson)
			}
		})
	}
}
