package weaviate

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/weaviate/weaviate/entities/models"
)

// compactExp is an experience the compaction tests edit.
func compactExp(id string) *hindsight.Experience {
	return &hindsight.Experience{ID: id, Namespace: "team", Server: "files", Tool: "upload",
		Situation: "the gateway answered 413", Lesson: "retry the upload with a smaller chunk size", Confidence: 0.8,
		SourceTask: "task-1"}
}

// TestCompactOverTenThousand: an experience with just over 10,000 deltas
// (more than Weaviate lists at once, which made every read of it fail)
// is compacted by its next read, which folds every delta; reads after
// fetch one checkpoint, and their cost stays that of an experience
// edited as often since.
func TestCompactOverTenThousand(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	emb := embedder.NewLocal(0)
	open := func() *Store {
		s, err := Open(ctx, Config{URL: srv.URL, GRPC: srv.GRPC, Class: "CompactBig"}, emb)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	for _, id := range []string{"big", "small"} {
		if err := s.Put(ctx, compactExp(id)); err != nil {
			t.Fatal(err)
		}
	}
	o, err := s.get(ctx, "team", "big")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ensureDeltaTenant(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	// Batch-insert the deltas as 10,001 reinforcements would have left
	// them, plus a legacy hit counter.
	const n = listMax + 1
	at := time.Now().UnixNano()
	var objs []*models.Object
	for i := range n {
		d := delta{Epoch: o.epoch, Base: 1, At: at + int64(i), Token: uuid.NewString(), Evidence: 1}
		if i == n-1 {
			d.AddTasks = []string{"last-task"}
		}
		obj, err := s.deltaObject("team", "big", d.Token, kindEdit, d)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj)
	}
	h, err := s.deltaObject("team", "big", s.hitsID("team", "big", o.epoch), kindHits, hits{Epoch: o.epoch, Count: 7, Last: at})
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, h)
	for i := 0; i < len(objs); i += 1000 {
		if err := s.write(ctx, objs[i:min(i+1000, len(objs))]...); err != nil {
			t.Fatal(err)
		}
	}
	if _, more, err := s.deltaIDs(ctx, "team", "big"); err != nil || !more {
		t.Fatalf("listing %d deltas: more %v, %v; want more than Weaviate lists", n+1, more, err)
	}

	r := open()
	g, err := r.Get(ctx, "team", "big")
	if err != nil {
		t.Fatalf("read of an experience with %d deltas: %v", n, err)
	}
	if g.Version != 1+n || g.EvidenceCount != n || g.HitCount != 7 || !slices.Contains(g.EvidenceTasks, "last-task") {
		t.Fatalf("after compaction: version %d evidence %d hits %d tasks %v; want %d, %d, 7 and last-task",
			g.Version, g.EvidenceCount, g.HitCount, g.EvidenceTasks, 1+n, n)
	}
	st := r.Stats()
	t.Logf("first read: %d checkpoints, %d objects folded, %d deleted, %d fetched", st.Compactions, st.Folded, st.Deleted, st.Fetched)
	if st.Compactions < 1 || st.Deleted < n+1-compactAt {
		t.Fatalf("stats %+v: want a compaction that deleted the deltas", st)
	}
	if err := testutil.CollectAndCompare(r, strings.NewReader(fmt.Sprintf(`
# HELP hindsight_weaviate_compactions_total Checkpoints written: delta objects of an experience folded into one.
# TYPE hindsight_weaviate_compactions_total counter
hindsight_weaviate_compactions_total %d
`, st.Compactions)), "hindsight_weaviate_compactions_total"); err != nil {
		t.Errorf("metrics: %v", err)
	}
	left, _, err := r.deltaIDs(ctx, "team", "big")
	if err != nil || len(left) > 3 {
		t.Fatalf("%d delta objects left after compaction (want the checkpoint and what it could not list), %v", len(left), err)
	}

	// Read cost afterwards: a new process's read of the compacted
	// experience, then both edited 5 more times: the compacted one costs
	// no more than the one never compacted plus what compaction left (its
	// checkpoint and the objects past the first 10,000).
	fetched := func(id string) int64 {
		t.Helper()
		s := open()
		if _, err := s.Get(ctx, "team", id); err != nil {
			t.Fatal(err)
		}
		return s.Stats().Fetched
	}
	if f := fetched("big"); f > int64(len(left)) {
		t.Fatalf("a read after compaction fetched %d objects, %d are left", f, len(left))
	}
	w := open()
	for range 5 {
		for _, id := range []string{"big", "small"} {
			e, err := w.Get(ctx, "team", id)
			if err != nil {
				t.Fatal(err)
			}
			e.EvidenceCount++
			if err := w.Put(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	big, small := fetched("big"), fetched("small")
	t.Logf("objects fetched by a new process's read: %d for the compacted experience, %d for one with 5 edits", big, small)
	if big > small+int64(len(left)) {
		t.Fatalf("read of the compacted experience fetched %d objects, of one edited as often since %d", big, small)
	}
}

// TestCompactKilledMidway: a compaction that stops after writing its
// checkpoint, before deleting what it folded, loses and doubles nothing
// for any reader; a later compaction and two at once finish the job.
func TestCompactKilledMidway(t *testing.T) {
	srv := weaviatetest.Start(t)
	ctx := context.Background()
	emb := embedder.NewLocal(0)
	open := func() *Store {
		s, err := Open(ctx, Config{URL: srv.URL, GRPC: srv.GRPC, Class: "CompactKilled"}, emb)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if err := s.Put(ctx, compactExp("k1")); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		e, err := s.Get(ctx, "team", "k1")
		if err != nil {
			t.Fatal(err)
		}
		e.EvidenceCount++
		e.EvidenceTasks = append(e.EvidenceTasks, fmt.Sprintf("task-%d", i))
		if i == 5 {
			e.Lesson = "retry with a 1 MiB chunk"
		}
		if err := s.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordHits(ctx, "team", []string{"k1"}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	read := func(what string) *hindsight.Experience {
		t.Helper()
		g, err := open().Get(ctx, "team", "k1")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		g.Vector = nil
		return g
	}
	want := read("before compaction")
	if want.Version != 13 || want.EvidenceCount != 12 || want.HitCount != 12 {
		t.Fatalf("before compaction: %+v", want)
	}
	o, err := s.get(ctx, "team", "k1")
	if err != nil {
		t.Fatal(err)
	}
	killed := open()
	killed.stopAfterCheckpoint = true
	if _, err := killed.compact(ctx, "team", "k1", o.epoch); !errors.Is(err, errCompactStopped) {
		t.Fatalf("compaction stopped midway: %v", err)
	}
	oids, _, _ := s.deltaIDs(ctx, "team", "k1")
	t.Logf("%d delta objects after a compaction stopped midway (the checkpoint and all it folded)", len(oids))
	if got := read("after a compaction stopped midway"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a compaction stopped midway:\n%+v\nwant\n%+v", got, want)
	}
	// The writer goes on: one more hit over its counter, folded already.
	if err := s.RecordHits(ctx, "team", []string{"k1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	want = read("after one more hit")
	if want.HitCount != 13 {
		t.Fatalf("hits %d after one more, want 13", want.HitCount)
	}
	// Two compactors at once.
	var wg sync.WaitGroup
	for range 2 {
		c := open()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.compact(ctx, "team", "k1", o.epoch); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := read("after two compactions at once"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after two compactions at once:\n%+v\nwant\n%+v", got, want)
	}
	oids, _, _ = s.deltaIDs(ctx, "team", "k1")
	if len(oids) > 2 {
		t.Fatalf("%d delta objects left after two compactions", len(oids))
	}
	// The writer's counter was deleted; its next hit writes it again
	// with its whole count, which the checkpoint's reading does not add to.
	if err := s.RecordHits(ctx, "team", []string{"k1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := read("after a hit over a deleted counter"); got.HitCount != 14 || got.Version != want.Version {
		t.Fatalf("after a hit over a deleted counter: hits %d version %d, want 14 and %d", got.HitCount, got.Version, want.Version)
	}
}
