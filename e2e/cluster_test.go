//go:build unix

package e2e

// End-to-end test of a team on a Weaviate cluster: two real daemons with
// homes of their own, on different nodes of a real 3-node cluster,
// sharing one namespace while agents run tasks through their sidecars.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/demo"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

// team is two daemons, A on weaviate-1 and B on weaviate-2, both mapping
// the demo's server to namespace "team"; everything else A learns stays
// in "private-a", B's in "private-b".
type team struct {
	exe    string
	a, b   hindsight.Home
	ca, cb *daemon.Client
}

// teamConfig is the configuration appended to a home's (see weaviateHome).
func teamConfig(private string) string {
	return "    replication_factor: 3\n  namespace: " + private + "\n  namespaces:\n    " + demo.ServerName + ": team\n"
}

// TestTwoDaemonsShareCluster: a lesson A's agent learns is found by B's
// agent, which then makes no mistake; a lesson of A's private server never
// reaches B's agents; with weaviate-3 killed both daemons go on
// reflecting, storing and answering; weaviate-3 comes back and holds
// everything by itself; concurrent edits from both daemons of one
// experience, and both daemons learning the same lessons at once, are all
// kept.
func TestTwoDaemonsShareCluster(t *testing.T) {
	skipWithoutWeaviate(t)
	exe := testbin.HindsightFull(t)
	c := weaviatetest.StartCluster(t, 3)
	ctx := context.Background()
	tm := &team{exe: exe, a: weaviateHome(t, c.Nodes[0], teamConfig("private-a")), b: weaviateHome(t, c.Nodes[1], teamConfig("private-b"))}
	var err error
	if tm.ca, err = daemon.EnsureRunning(ctx, tm.a, exe); err != nil {
		t.Fatal(err)
	}
	if tm.cb, err = daemon.EnsureRunning(ctx, tm.b, exe); err != nil {
		t.Fatal(err)
	}

	tm.shared(t)
	tm.private(t)

	c.Nodes[2].Kill()
	t.Log("weaviate-3 killed")
	tm.nodeDown(t)

	c.Nodes[2].Start(t)
	t.Log("weaviate-3 back")
	tm.caughtUp(t, c.Nodes[2])
	tm.concurrentEdits(t)
	tm.concurrentReinforce(t)
}

// shared: A's agent fails and A learns; B finds the lessons in the team's
// namespace, and B's agent, told them, makes no mistake.
func (tm *team) shared(t *testing.T) {
	ctx := context.Background()
	runDemoAgent(t, tm.exe, tm.a, "a-1", nil)
	learned := tm.waitLessons(t, tm.ca, "team", demo.ServerName, 2)
	start := time.Now()
	eventually(t, "A's lessons found through B", time.Minute, func() (bool, string) {
		res, err := tm.cb.Search(ctx, hindsight.Query{Namespace: "team", Server: demo.ServerName, Text: "fetch_report login invoice", K: 10, NoHit: true})
		return err == nil && containsAll(expIDs(experiences(res)), expIDs(learned)), fmt.Sprintf("%d results, %v", len(res), err)
	})
	t.Logf("A's %d lessons found through B %v after A listed them", len(learned), time.Since(start).Round(time.Millisecond))
	out := runCLI(t, tm.exe, string(tm.b), "experiences", "search", "--namespace", "team", "--server", demo.ServerName, "-k", "10", "--no-hit", "fetch report")
	for _, e := range learned {
		if !strings.Contains(out, e.ID) {
			t.Fatalf("hindsight experiences search on B does not show A's lesson %s:\n%s", e.ID, out)
		}
	}
	tr := runDemoAgent(t, tm.exe, tm.b, "b-1", nil)
	if !tr.Done || tr.Failures != 0 || len(tr.Lessons) == 0 {
		t.Fatalf("B's agent with A's lessons: done %v, %d failures, lessons used %q", tr.Done, tr.Failures, tr.Lessons)
	}
}

// private: what A learns about a server it does not map stays in
// private-a: B lists and finds none of it in the team's namespace, and
// B's agent at that server in the team's namespace is told nothing.
func (tm *team) private(t *testing.T) {
	ctx := context.Background()
	runDemoAgent(t, tm.exe, tm.a, "a-priv", nil, "--name", "ledger")
	priv := tm.waitLessons(t, tm.ca, "private-a", "ledger", 2)
	all, err := tm.cb.Experiences(ctx, hindsight.ListOptions{Namespace: "team", IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tm.cb.Search(ctx, hindsight.Query{Namespace: "team", Text: priv[0].Lesson, K: 20, NoHit: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range append(all, experiences(res)...) {
		if e.Server == "ledger" || slices.Contains(expIDs(priv), e.ID) {
			t.Fatalf("A's private lesson is in B's team namespace: %+v", e)
		}
	}
	tr := runDemoAgent(t, tm.exe, tm.b, "b-priv", nil, "--name", "ledger", "--namespace", "team")
	if len(tr.Lessons) != 0 || tr.Failures == 0 {
		t.Fatalf("B's agent at ledger in team used lessons %q and made %d mistakes; A's private lessons reached it", tr.Lessons, tr.Failures)
	}
}

// nodeDown: with weaviate-3 gone each daemon's agent meets a new server
// and its lessons are reflected and stored, the other daemon's agent is
// told them, and no query_hindsight says the store is unavailable.
func (tm *team) nodeDown(t *testing.T) {
	var wg sync.WaitGroup
	trs := make([]*demo.Transcript, 2)
	for i, run := range []struct {
		home         hindsight.Home
		task, server string
	}{{tm.a, "a-down", "sched"}, {tm.b, "b-down", "dispatch"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trs[i] = runDemoAgent(t, tm.exe, run.home, run.task, nil, "--name", run.server, "--namespace", "team")
		}()
	}
	wg.Wait()
	if t.Failed() { // a run failed in its goroutine, which only ended that goroutine
		t.FailNow()
	}
	for _, tr := range trs {
		noUnavailable(t, tr)
	}
	sched := tm.waitLessons(t, tm.ca, "team", "sched", 2)
	dispatch := tm.waitLessons(t, tm.cb, "team", "dispatch", 2)
	for task, c := range map[string]*daemon.Client{"a-down": tm.ca, "b-down": tm.cb} {
		eventually(t, task+" reflected", time.Minute, func() (bool, string) {
			got, err := c.Task(context.Background(), task)
			return err == nil && got.Reflection == "done", fmt.Sprint(err)
		})
	}
	// Each daemon's agent is told the lessons the other stored.
	for _, run := range []struct {
		home         hindsight.Home
		task, server string
		want         []hindsight.Experience
	}{{tm.a, "a-down-2", "dispatch", dispatch}, {tm.b, "b-down-2", "sched", sched}} {
		tr := runDemoAgent(t, tm.exe, run.home, run.task, nil, "--name", run.server, "--namespace", "team")
		noUnavailable(t, tr)
		if !tr.Done || tr.Failures != 0 || len(tr.Lessons) == 0 {
			t.Fatalf("%s with weaviate-3 down, told the other daemon's lessons %v: done %v, %d failures, lessons used %q",
				run.task, expIDs(run.want), tr.Done, tr.Failures, tr.Lessons)
		}
	}
}

// caughtUp: weaviate-3, read alone (consistency ONE), comes to hold every
// experience of the team's namespace.
func (tm *team) caughtUp(t *testing.T, n3 *weaviatetest.Server) {
	ctx := context.Background()
	want, err := tm.ca.Experiences(ctx, hindsight.ListOptions{Namespace: "team", IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := weaviate.Open(ctx, weaviate.Config{URL: n3.URL, GRPC: n3.GRPC, Consistency: weaviate.ConsistencyOne, RetryFor: 40 * time.Second}, embedder.NewLocal(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	eventually(t, "weaviate-3 caught up", 2*time.Minute, func() (bool, string) {
		got, err := s.List(ctx, hindsight.ListOptions{Namespace: "team", IncludeDeleted: true})
		return err == nil && containsAll(expIDs(got), expIDs(want)), fmt.Sprintf("%d of %d, %v", len(got), len(want), err)
	})
	t.Logf("weaviate-3, read alone, holds all %d team experiences %v after it was ready", len(want), time.Since(start).Round(time.Millisecond))
}

// concurrentEdits: A edits a lesson's situation and pins it while B edits
// its lesson and forgets it, all at once from the version both read; both
// daemons read back every change. An edit refused because the other landed first
// (409, as for a person in the web UI) is made again on the new version.
func (tm *team) concurrentEdits(t *testing.T) {
	ctx := context.Background()
	learned := tm.waitLessons(t, tm.ca, "team", demo.ServerName, 1)
	id := learned[0].ID
	situation, lesson := "edited on A: the report needs a session", "edited on B: call login before fetch_report"
	edit := func(c *daemon.Client, req daemon.EditRequest) error {
		for {
			cur, err := c.Experience(ctx, "team", id)
			if err != nil {
				return err
			}
			req.Namespace, req.Version = "team", cur.Version
			_, err = c.Edit(ctx, id, req)
			var ae *daemon.APIError
			if !errors.As(err, &ae) || ae.Status != 409 {
				return err
			}
		}
	}
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i, op := range []func() error{
		func() error { return edit(tm.ca, daemon.EditRequest{Situation: &situation}) },
		func() error { return edit(tm.cb, daemon.EditRequest{Lesson: &lesson}) },
		func() error { _, err := tm.ca.Pin(ctx, "team", id, true); return err },
		func() error { _, err := tm.cb.Forget(ctx, "team", id); return err },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = op() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent edits: %v", err)
	}
	for name, c := range map[string]*daemon.Client{"A": tm.ca, "B": tm.cb} {
		e, err := c.Experience(ctx, "team", id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Situation != situation || e.Lesson != lesson || !e.Pinned || !e.Deleted || e.Version < learned[0].Version+4 {
			t.Fatalf("%s reads after concurrent edits: situation %q, lesson %q, pinned %v, forgotten %v, version %d (was %d); an update was lost",
				name, e.Situation, e.Lesson, e.Pinned, e.Deleted, e.Version, learned[0].Version)
		}
	}
}

// concurrentReinforce: both daemons' agents meet a new server at once and
// both daemons reflect the same lessons from their tasks at the same
// time; whichever way the merges interleave (one reinforces the other's,
// or both add), every lesson keeps the evidence of both tasks.
func (tm *team) concurrentReinforce(t *testing.T) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, run := range []struct {
		home hindsight.Home
		task string
	}{{tm.a, "a-rf"}, {tm.b, "b-rf"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runDemoAgent(t, tm.exe, run.home, run.task, nil, "--name", "billing-eu", "--namespace", "team")
		}()
	}
	wg.Wait()
	if t.Failed() { // a run failed in its goroutine, which only ended that goroutine
		t.FailNow()
	}
	for task, c := range map[string]*daemon.Client{"a-rf": tm.ca, "b-rf": tm.cb} {
		eventually(t, task+" reflected", time.Minute, func() (bool, string) {
			got, err := c.Task(ctx, task)
			return err == nil && got.Reflection == "done", fmt.Sprint(err)
		})
	}
	for name, c := range map[string]*daemon.Client{"A": tm.ca, "B": tm.cb} {
		got, err := c.Experiences(ctx, hindsight.ListOptions{Namespace: "team", Server: "billing-eu"})
		if err != nil || len(got) == 0 {
			t.Fatalf("%s lists %d lessons about billing-eu, %v", name, len(got), err)
		}
		tasks := map[string][]string{} // tool → evidence tasks
		for _, e := range got {
			tasks[e.Tool] = append(tasks[e.Tool], e.EvidenceTasks...)
		}
		// Each lesson both learnt at once is one: the copies were merged.
		if len(got) != len(tasks) {
			t.Fatalf("%s lists %d live lessons about billing-eu for %d tools; copies learnt at once were not merged", name, len(got), len(tasks))
		}
		for tool, ts := range tasks {
			if !containsAll(ts, []string{"a-rf", "b-rf"}) {
				t.Fatalf("%s: lessons about billing-eu's %s have the evidence of tasks %v; a reflection's update was lost", name, tool, ts)
			}
		}
		t.Logf("%s: %d lessons about billing-eu after both daemons learnt them at once", name, len(got))
	}
}

// waitLessons waits until c lists at least n experiences about server in
// ns and returns them.
func (tm *team) waitLessons(t *testing.T, c *daemon.Client, ns, server string, n int) []hindsight.Experience {
	t.Helper()
	var got []hindsight.Experience
	eventually(t, fmt.Sprintf("%d lessons about %s in %s", n, server, ns), 2*time.Minute, func() (bool, string) {
		var err error
		got, err = c.Experiences(context.Background(), hindsight.ListOptions{Namespace: ns, Server: server})
		return err == nil && len(got) >= n, fmt.Sprintf("%d, %v", len(got), err)
	})
	return got
}

// noUnavailable fails the test when a query_hindsight of tr answered that
// the store or Hindsight is unavailable, or the task was not done.
func noUnavailable(t *testing.T, tr *demo.Transcript) {
	t.Helper()
	if !tr.Done {
		t.Fatalf("run not done: %+v", tr.Steps)
	}
	for _, s := range tr.Steps {
		if strings.Contains(s.Result, "unavailable") || strings.Contains(s.Hindsight, "unavailable") {
			t.Fatalf("%s answered %q with one node down", s.Tool, s.Result)
		}
	}
}

func expIDs(es []hindsight.Experience) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func experiences(res []hindsight.ScoredExperience) []hindsight.Experience {
	out := make([]hindsight.Experience, len(res))
	for i, r := range res {
		out[i] = r.Experience
	}
	return out
}

// containsAll reports whether have holds every one of want.
func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
