package weaviate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/storetest"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// TestCluster runs one 3-node cluster for the whole package run and shares
// it among its subtests: the conformance suite at replication factor 3,
// two stores (as two daemons would) sharing a namespace through different
// nodes, a node killed and brought back, and concurrent edits of one
// experience from both stores.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("the 3-node cluster test takes a minute; skipped in -short")
	}
	start := time.Now()
	c := weaviatetest.StartCluster(t, 3)
	t.Logf("3-node cluster ready in %v", time.Since(start).Round(time.Millisecond))
	emb := embedder.NewLocal(0)
	open := func(t *testing.T, node int, class string) *weaviate.Store {
		t.Helper()
		n := c.Nodes[node]
		s, err := weaviate.Open(context.Background(), weaviate.Config{URL: n.URL, GRPC: n.GRPC, Class: class,
			ReplicationFactor: 3, RetryFor: 40 * time.Second}, emb)
		if err != nil {
			t.Fatalf("open store on weaviate-%d: %v", node+1, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	ctx := context.Background()

	t.Run("Conformance", func(t *testing.T) {
		n := 0
		classes := map[hindsight.ExperienceStore]string{}
		storetest.Run(t, storetest.Backend{
			Embedder: emb,
			New: func(t *testing.T) hindsight.ExperienceStore {
				n++
				class := fmt.Sprintf("ClusterConformance%d", n)
				s := open(t, n%3, class) // each test on another node
				classes[s] = class
				return s
			},
			Reopen: func(t *testing.T, s hindsight.ExperienceStore) hindsight.ExperienceStore {
				s.Close()
				class := classes[s]
				s2 := open(t, 1, class) // another node sees the same data
				classes[s2] = class
				return s2
			},
		})
	})

	t.Run("Replication", func(t *testing.T) {
		s := open(t, 0, "ClusterReplication")
		if f, cl := s.Replication(); f != 3 || cl != weaviate.ConsistencyQuorum {
			t.Fatalf("replication = %d, %q; want 3, QUORUM", f, cl)
		}
		_, err := weaviate.Open(ctx, weaviate.Config{URL: c.Nodes[1].URL, Class: "ClusterReplication", ReplicationFactor: 1}, emb)
		if err == nil || !strings.Contains(err.Error(), "replicated 3 times") || !strings.Contains(err.Error(), "replication_factor") {
			t.Fatalf("open with factor 1 over a factor-3 collection: %v; want a mismatch error naming the fix", err)
		}
		s2, err := weaviate.Open(ctx, weaviate.Config{URL: c.Nodes[2].URL, Class: "ClusterReplication"}, emb)
		if err != nil {
			t.Fatalf("open with no factor: %v", err)
		}
		if f, _ := s2.Replication(); f != 3 {
			t.Fatalf("an unset factor adopts the collection's: got %d", f)
		}
	})

	// The two stores of the remaining subtests are two daemons' on two
	// nodes; weaviate-3 is the one killed.
	a := open(t, 0, "ClusterShared")
	b := open(t, 1, "ClusterShared")

	t.Run("NewNamespaceImport", func(t *testing.T) {
		// A new tenant's shard reaches the nodes a moment after it is
		// made: the first import and read through another node must
		// not fail on it.
		for i := range 3 {
			ns := fmt.Sprintf("fresh-%d", i)
			if err := a.Import(ctx, []*hindsight.Experience{exp(ns, "f1", "fresh lesson")}); err != nil {
				t.Fatalf("import into new namespace %s: %v", ns, err)
			}
			if _, err := b.Get(ctx, ns, "f1"); err != nil {
				t.Fatalf("read through another node: %v", err)
			}
		}
	})

	t.Run("Shared", func(t *testing.T) {
		// Daemon A's reflection stores a team lesson and a private one,
		// as its merger would for two servers' namespaces.
		team := &reflect.Merger{Store: a, Namespace: "team", Machine: "host-a/00000001"}
		private := &reflect.Merger{Store: a, Namespace: "private-a", Machine: "host-a/00000001"}
		taskEnd := time.Now()
		res, err := team.Merge(ctx, taskEnd, []hindsight.Experience{*exp("", "", "retry the upload with a smaller chunk size when the gateway answers 413")})
		if err != nil || len(res) != 1 || res[0].Outcome != reflect.Added {
			t.Fatalf("merge on A: %+v, %v", res, err)
		}
		id := res[0].ID
		if _, err := private.Merge(ctx, taskEnd, []hindsight.Experience{*exp("", "", "retry the upload with the staging bucket credentials")}); err != nil {
			t.Fatal(err)
		}
		var got hindsight.ScoredExperience
		found := waitFor(t, 10*time.Second, func() bool {
			res, err := b.Search(ctx, hindsight.Query{Namespace: "team", Text: "upload gateway 413 chunk", K: 3, NoHit: true})
			if err == nil && len(res) > 0 && res[0].ID == id {
				got = res[0]
				return true
			}
			return false
		})
		t.Logf("a lesson learnt through weaviate-1 was found through weaviate-2 after %v", found)
		if got.SourceMachine != "host-a/00000001" || got.SourceAgent != "test" {
			t.Errorf("source machine %q agent %q, want host-a/00000001 and test", got.SourceMachine, got.SourceAgent)
		}
		// B learns the same lesson: it reinforces A's, keeping A's machine.
		other := &reflect.Merger{Store: b, Namespace: "team", Machine: "host-b/00000002"}
		e := exp("", "", "retry the upload with a smaller chunk size when the gateway answers 413")
		e.SourceTask = "task-on-b"
		res, err = other.Merge(ctx, taskEnd, []hindsight.Experience{*e})
		if err != nil || len(res) != 1 || res[0].Outcome != reflect.Reinforced || res[0].ID != id {
			t.Fatalf("merge of the same lesson on B: %+v, %v; want A's reinforced", res, err)
		}
		if g, err := a.Get(ctx, "team", id); err != nil || g.EvidenceCount != 2 || g.SourceMachine != "host-a/00000001" {
			t.Fatalf("after B's reinforcement, A reads %+v, %v", g, err)
		}
		all, err := b.List(ctx, hindsight.ListOptions{Namespace: "team"})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			if strings.Contains(r.Lesson, "staging bucket") {
				t.Fatalf("a private namespace's lesson is in the team's: %+v", r)
			}
		}
	})

	t.Run("NodeDown", func(t *testing.T) {
		c.Nodes[2].Kill()
		t.Logf("weaviate-3 killed")
		var ids []string
		for i, s := range []*weaviate.Store{a, b, a, b} {
			id := fmt.Sprintf("down%d", i)
			ids = append(ids, id)
			if err := s.Put(ctx, exp("team", id, fmt.Sprintf("lesson %d stored while weaviate-3 was down about quota exhaustion", i))); err != nil {
				t.Fatalf("put with a node down: %v", err)
			}
		}
		for _, s := range []*weaviate.Store{a, b} {
			res, err := s.Search(ctx, hindsight.Query{Namespace: "team", Text: "stored while down quota exhaustion", K: 10, NoHit: true})
			if err != nil || len(res) < len(ids) {
				t.Fatalf("search with a node down: %d results, %v", len(res), err)
			}
		}
		back := time.Now()
		c.Nodes[2].Start(t)
		t.Logf("weaviate-3 back after %v", time.Since(back).Round(time.Millisecond))
		// Read from weaviate-3 alone (consistency ONE): it must catch up
		// on what it missed by itself.
		n3, err := weaviate.Open(ctx, weaviate.Config{URL: c.Nodes[2].URL, GRPC: c.Nodes[2].GRPC, Class: "ClusterShared",
			Consistency: weaviate.ConsistencyOne, RetryFor: 40 * time.Second}, emb)
		if err != nil {
			t.Fatal(err)
		}
		took := waitFor(t, 120*time.Second, func() bool {
			all, err := n3.List(ctx, hindsight.ListOptions{Namespace: "team"})
			if err != nil {
				return false
			}
			have := 0
			for _, e := range all {
				if slices.Contains(ids, e.ID) {
					have++
				}
			}
			return have == len(ids)
		})
		t.Logf("weaviate-3 caught up %v after it was back", took)
	})

	t.Run("ConcurrentEdits", func(t *testing.T) {
		concurrentEdits(t, a, b)
	})

	t.Run("ConcurrentLearning", func(t *testing.T) {
		concurrentLearning(t, a, b, "team-learning")
	})

	t.Run("DedupeSweep", func(t *testing.T) {
		dedupeSweep(t, open(t, 0, "ClusterSweep"), open(t, 1, "ClusterSweep"), emb)
	})

	t.Run("Failover", func(t *testing.T) {
		failoverNode(t, c, emb)
	})
}

// failoverNode: a store that prefers weaviate-2, with the two others as
// its failover, goes on searching and writing when weaviate-2 is killed
// (REST only: no gRPC address, which is not failed over).
func failoverNode(t *testing.T, c *weaviatetest.Cluster, emb hindsight.Embedder) {
	ctx := context.Background()
	s, err := weaviate.Open(ctx, weaviate.Config{URL: c.Nodes[1].URL, Failover: []string{c.Nodes[2].URL, c.Nodes[0].URL},
		Class: "ClusterFailover", ReplicationFactor: 3, RetryFor: 40 * time.Second}, emb)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(ctx, exp("team", "before", "lesson stored before weaviate-2 was killed about disk quota")); err != nil {
		t.Fatal(err)
	}
	c.Nodes[1].Kill()
	t.Logf("weaviate-2 killed")
	defer c.Nodes[1].Start(t)
	res, err := s.Search(ctx, hindsight.Query{Namespace: "team", Text: "stored before killed disk quota", K: 3, NoHit: true})
	if err != nil || len(res) == 0 || res[0].Experience.ID != "before" {
		t.Fatalf("search with the preferred node down: %d results, %v", len(res), err)
	}
	if err := s.Put(ctx, exp("team", "after", "lesson stored while weaviate-2 was down about disk quota")); err != nil {
		t.Fatalf("put with the preferred node down: %v", err)
	}
	if _, err := s.Get(ctx, "team", "after"); err != nil {
		t.Fatalf("get with the preferred node down: %v", err)
	}
	if got := s.Stats().Failovers; got != 1 {
		t.Errorf("Stats().Failovers = %d, want 1", got)
	}
}

// dedupeSweep: copies of a lesson that two daemons stored without either
// look seeing the other's (put through the stores, past the merger) are
// merged by one sweep into the older, evidence united, the newer's pin
// kept; a second pair is swept by two daemons at once, the same way; a
// sweep run again changes nothing.
func dedupeSweep(t *testing.T, a, b *weaviate.Store, emb hindsight.Embedder) {
	ctx := context.Background()
	put := func(s *weaviate.Store, id, tool, task string, pinned bool) {
		t.Helper()
		e := exp("team", id, "retry the upload with a smaller chunk size when the gateway answers 413")
		e.Tool, e.SourceTask, e.EvidenceTasks, e.EvidenceCount, e.Pinned = tool, task, []string{task}, 1, pinned
		if err := s.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	put(a, "s-a", "upload", "task-a", false)
	put(b, "s-b", "upload", "task-b", true)
	put(a, "other", "download", "task-c", false) // another tool: never a copy
	// A list is answered by one replica: wait until each node's has them.
	listed := func(n int) func() bool {
		return func() bool {
			for _, s := range []*weaviate.Store{a, b} {
				if l, err := s.List(ctx, hindsight.ListOptions{Namespace: "team"}); err != nil || len(l) != n {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 10*time.Second, listed(3))
	sa := &reflect.Sweeper{Merger: &reflect.Merger{Store: a, Embedder: emb, Metrics: reflect.NewMetrics()}}
	sb := &reflect.Sweeper{Merger: &reflect.Merger{Store: b, Embedder: emb, Metrics: reflect.NewMetrics()}}
	n, err := sa.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d merged, %v; want 1", n, err)
	}
	if got := sa.Merger.Metrics.Merged()[reflect.Deduplicated]; got != 1 {
		t.Fatalf("dedupe metric %d, want 1", got)
	}
	checkMerged := func(keep, loser string, tasks ...string) *hindsight.Experience {
		t.Helper()
		k, err := b.Get(ctx, "team", keep)
		if err != nil {
			t.Fatal(err)
		}
		if k.SupersededBy != "" || !k.Pinned || k.EvidenceCount != 2 || !slices.Equal(k.EvidenceTasks, tasks) {
			t.Fatalf("survivor %s: superseded by %q pinned %v evidence %d tasks %v; want live, pinned, 2, %v",
				keep, k.SupersededBy, k.Pinned, k.EvidenceCount, k.EvidenceTasks, tasks)
		}
		if l, err := b.Get(ctx, "team", loser); err != nil || l.SupersededBy != keep {
			t.Fatalf("copy %s: %+v, %v; want it superseded by %s", loser, l, err, keep)
		}
		return k
	}
	first := checkMerged("s-a", "s-b", "task-a", "task-b")
	if o, err := a.Get(ctx, "team", "other"); err != nil || o.SupersededBy != "" || o.Version != 1 {
		t.Fatalf("the other tool's lesson: %+v, %v; want it untouched", o, err)
	}

	// A second pair, swept by both daemons at once.
	put(b, "t-b", "upload-2", "task-d", true)
	put(a, "t-a", "upload-2", "task-e", false)
	waitFor(t, 10*time.Second, listed(4))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*reflect.Sweeper{sa, sb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Sweep(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	second := checkMerged("t-b", "t-a", "task-d", "task-e")

	// Swept again by both: nothing left to merge, nothing changes.
	for _, s := range []*reflect.Sweeper{sa, sb} {
		if n, err := s.Sweep(ctx); err != nil || n != 0 {
			t.Fatalf("sweep again: %d merged, %v; want 0", n, err)
		}
	}
	for _, k := range []*hindsight.Experience{first, second} {
		if g, err := a.Get(ctx, "team", k.ID); err != nil || g.Version != k.Version || g.EvidenceCount != 2 {
			t.Fatalf("%s after sweeping again: %+v, %v; want version %d unchanged", k.ID, g, err, k.Version)
		}
	}
}

// concurrentEdits has a and b reinforce one experience at once, each with
// its own tasks and searches (hit records) between; both must see every
// edit.
func concurrentEdits(t *testing.T, a, b *weaviate.Store) {
	ctx := context.Background()
	if err := a.Put(ctx, exp("team", "c1", "pin the dependency before regenerating the lock file")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { _, err := b.Get(ctx, "team", "c1"); return err == nil })
	const each = 6
	var wg sync.WaitGroup
	var hits atomic.Int32 // searches that returned c1, each a hit
	errs := make(chan error, 2*each)
	for side, s := range map[string]*weaviate.Store{"a": a, "b": b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				task := fmt.Sprintf("%s-task-%d", side, i)
				errs <- reinforce(ctx, s, "team", "c1", task)
				// A search's hit record races the other side's edits.
				res, err := s.Search(ctx, hindsight.Query{Namespace: "team", Text: "pin dependency lock file", K: 1})
				if err == nil && len(res) == 1 && res[0].ID == "c1" {
					hits.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d edits and %d hits of one experience from two stores at once", 2*each, hits.Load())
	for _, s := range []*weaviate.Store{a, b} {
		g, err := s.Get(ctx, "team", "c1")
		if err != nil {
			t.Fatal(err)
		}
		if g.EvidenceCount != 2*each || len(g.EvidenceTasks) != 2*each || g.Version != 1+2*each || g.HitCount != int(hits.Load()) {
			t.Fatalf("after %d edits from each store: evidence %d, tasks %d, version %d, hits %d of %d; an update was lost",
				each, g.EvidenceCount, len(g.EvidenceTasks), g.Version, g.HitCount, hits.Load())
		}
	}
}

// reinforce adds task's evidence to an experience as the reflection merger
// does: read, change, put, and again on a conflict.
func reinforce(ctx context.Context, s *weaviate.Store, ns, id, task string) error {
	for try := 0; try < 50; try++ {
		e, err := s.Get(ctx, ns, id)
		if err != nil {
			return err
		}
		e.EvidenceCount++
		e.EvidenceTasks = append(e.EvidenceTasks, task)
		err = s.Put(ctx, e)
		if !errors.Is(err, hindsight.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("reinforce %s with %s: still conflicting after 50 tries", id, task)
}

func exp(ns, id, lesson string) *hindsight.Experience {
	return &hindsight.Experience{ID: id, Namespace: ns, Server: "files", Tool: "upload", TaskType: "deploy",
		ErrorCode: "E1", Situation: lesson, Lesson: lesson, Confidence: 0.8, SourceAgent: "test", SourceTask: "task-1"}
}

// waitFor polls cond until it holds and returns how long that took; it
// fails the test after limit.
func waitFor(t *testing.T, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("condition not met after %v", limit)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Since(start).Round(time.Millisecond)
}

// concurrentLearning has a and b (two daemons' stores) learn the same
// lessons at the same moment from different tasks: each lesson must end
// as one live experience holding both tasks' evidence, the other copy
// superseded by it.
func concurrentLearning(t *testing.T, a, b *weaviate.Store, ns string) {
	ctx := context.Background()
	lessons := []string{
		"retry the upload with a smaller chunk size when the gateway answers 413",
		"list the bucket before deleting an object whose name came from an earlier listing",
		"refresh the token once before retrying a request the gateway answered 401",
	}
	for round, lesson := range lessons {
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 2)
		for side, s := range map[string]*weaviate.Store{"a": a, "b": b} {
			m := &reflect.Merger{Store: s, Namespace: ns, Machine: "host-" + side + "/0000000" + side}
			e := exp("", "", lesson)
			e.Tool = fmt.Sprintf("tool%d", round)
			e.SourceTask = fmt.Sprintf("task-%s-%d", side, round)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := m.Merge(ctx, time.Now(), []hindsight.Experience{*e})
				errs <- err
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []*weaviate.Store{a, b} {
			all, err := s.List(ctx, hindsight.ListOptions{Namespace: ns, Tool: fmt.Sprintf("tool%d", round), IncludeSuperseded: true})
			if err != nil {
				t.Fatal(err)
			}
			var live []hindsight.Experience
			for _, e := range all {
				if e.SupersededBy == "" {
					live = append(live, e)
				}
			}
			if len(live) != 1 {
				t.Fatalf("round %d: %d live copies of one lesson learnt by two daemons at once (of %d stored)", round, len(live), len(all))
			}
			k := live[0]
			if len(k.EvidenceTasks) != 2 || k.EvidenceCount < 2 {
				t.Fatalf("round %d: the merged lesson has tasks %v, evidence %d; want both tasks", round, k.EvidenceTasks, k.EvidenceCount)
			}
			for _, e := range all {
				if e.ID != k.ID && e.SupersededBy != k.ID {
					t.Fatalf("round %d: copy %s superseded by %q, want %s", round, e.ID, e.SupersededBy, k.ID)
				}
			}
			if len(all) == 2 && all[0].CreatedAt.After(all[1].CreatedAt) == (all[0].ID == k.ID) && !all[0].CreatedAt.Equal(all[1].CreatedAt) {
				t.Fatalf("round %d: the newer copy survived", round)
			}
		}
	}
}
