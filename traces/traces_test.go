package traces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/wire"
)

func TestIngestIsIdempotent(t *testing.T) {
	clk := tasktest.NewClock(t0)
	st := openTestStore(t, t.TempDir(), clk)
	defer st.Close()
	batch := []hindsight.Step{
		stdio(step("a", 1, 0), "s1", 100),
		stdio(step("a", 2, time.Second), "s1", 100),
		stdio(step("a", 3, 2*time.Second), "s1", 100),
	}
	if res := ingest(t, st, batch...); res.Accepted != 3 || res.Duplicates != 0 {
		t.Fatalf("first delivery: %+v", res)
	}
	// The same batch again (the outbox did not see the answer), then a
	// batch overlapping it, then one with a step twice.
	if res := ingest(t, st, batch...); res.Accepted != 0 || res.Duplicates != 3 {
		t.Fatalf("redelivery: %+v", res)
	}
	four := stdio(step("a", 4, 3*time.Second), "s1", 100)
	if res := ingest(t, st, batch[2], four); res.Accepted != 1 || res.Duplicates != 1 {
		t.Fatalf("overlap: %+v", res)
	}
	five := stdio(step("a", 5, 4*time.Second), "s1", 100)
	if res := ingest(t, st, five, five); res.Accepted != 1 || res.Duplicates != 1 {
		t.Fatalf("twice in a batch: %+v", res)
	}
	tasks, err := st.Tasks(context.Background(), TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].StepCount != 5 {
		t.Fatalf("tasks = %+v, want one with 5 steps", tasks)
	}
	task, err := st.Task(context.Background(), tasks[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range task.Steps {
		if s.StepIndex != i || s.Seq != uint64(i+1) || s.TaskID != task.ID {
			t.Errorf("step %d: index %d seq %d task %s", i, s.StepIndex, s.Seq, s.TaskID)
		}
	}
	// The caller's slice is not changed.
	if batch[0].TaskID != "" {
		t.Errorf("Ingest changed its input: %+v", batch[0])
	}
}

func TestIngestRejectsBadInput(t *testing.T) {
	st := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer st.Close()
	for _, bad := range [][]hindsight.Step{
		{step("", 1, 0)},
		{step("a/b", 1, 0)},
		{step("a", 1, 0), step("x\x00y", 2, 0)},
	} {
		if _, err := st.Ingest(context.Background(), bad); err == nil {
			t.Errorf("Ingest(%q) accepted a bad batch", bad[len(bad)-1].Source)
		}
	}
	// Nothing of a refused batch was stored.
	if n := len(placement(t, st)); n != 0 {
		t.Fatalf("%d steps stored from refused batches", n)
	}
}

func TestSegmentation(t *testing.T) {
	min := time.Minute
	cases := []struct {
		name string
		// batches are delivered in order; want names the task of each
		// step by a letter (same letter, same task) and its index.
		batches [][]hindsight.Step
		want    map[string]string // "source/seq" → "A0", "A1", "B0"…
	}{
		{
			name: "one stdio host across servers is one task",
			batches: [][]hindsight.Step{
				{stdio(step("fs", 1, 0), "s1", 100), stdio(step("fs", 2, min), "s1", 100)},
				{stdio(step("git", 1, 30*time.Second), "s2", 100)},
			},
			want: map[string]string{"fs/1": "A0", "fs/2": "A1", "git/1": "A2"},
		},
		{
			name: "different hosts are different tasks",
			batches: [][]hindsight.Step{
				{stdio(step("fs", 1, 0), "s1", 100), stdio(step("fs2", 1, time.Second), "s2", 200)},
			},
			want: map[string]string{"fs/1": "A0", "fs2/1": "B0"},
		},
		{
			name: "an idle gap splits a task",
			batches: [][]hindsight.Step{
				{stdio(step("fs", 1, 0), "s1", 100), stdio(step("fs", 2, 9*min), "s1", 100),
					stdio(step("fs", 3, 20*min), "s1", 100), stdio(step("fs", 4, 21*min), "s1", 100)},
			},
			want: map[string]string{"fs/1": "A0", "fs/2": "A1", "fs/3": "B0", "fs/4": "B1"},
		},
		{
			name: "HTTP sessions are tasks of their own",
			batches: [][]hindsight.Step{
				{httpStep(step("web", 1, 0), "h1"), httpStep(step("web", 2, time.Second), "h2"), httpStep(step("web", 3, 2*time.Second), "h1")},
			},
			want: map[string]string{"web/1": "A0", "web/2": "B0", "web/3": "A1"},
		},
		{
			name: "the host pid of an HTTP step does not group it",
			batches: [][]hindsight.Step{
				{stdio(step("fs", 1, 0), "s1", 100), func() hindsight.Step {
					s := httpStep(step("web", 1, time.Second), "h1")
					s.HostPID = 100
					return s
				}()},
			},
			want: map[string]string{"fs/1": "A0", "web/1": "B0"},
		},
		{
			name: "an explicit task wins over host, session and gap",
			batches: [][]hindsight.Step{
				{explicit(stdio(step("fs", 1, 0), "s1", 100), "job-7"), stdio(step("fs", 2, time.Second), "s1", 100),
					explicit(httpStep(step("web", 1, 2*time.Second), "h1"), "job-7"),
					explicit(stdio(step("fs", 3, 60*min), "s1", 100), "job-7")},
			},
			want: map[string]string{"fs/1": "job-70", "web/1": "job-71", "fs/3": "job-72", "fs/2": "A0"},
		},
		{
			name: "a late step from another sidecar joins the task it belongs to",
			batches: [][]hindsight.Step{
				{stdio(step("fs", 1, 10*min), "s1", 100), stdio(step("fs", 2, 11*min), "s1", 100)},
				{stdio(step("git", 1, 5*min), "s2", 100)},   // before the task's start, within the gap
				{stdio(step("old", 1, -60*min), "s3", 100)}, // far before: a task of its own
			},
			want: map[string]string{"fs/1": "A0", "fs/2": "A1", "git/1": "A2", "old/1": "B0"},
		},
		{
			name: "steps without session or host are grouped by their sidecar",
			batches: [][]hindsight.Step{
				{step("x", 1, 0), step("x", 2, time.Second), step("y", 1, time.Second)},
			},
			want: map[string]string{"x/1": "A0", "x/2": "A1", "y/1": "B0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
			defer st.Close()
			for _, b := range tc.batches {
				ingest(t, st, b...)
			}
			got := placement(t, st)
			if len(got) != len(tc.want) {
				t.Fatalf("placed %d steps, want %d: %v", len(got), len(tc.want), got)
			}
			letters := map[string]string{} // want letter → task id
			ids := map[string]string{}     // task id → want letter
			for k, w := range tc.want {
				p, ok := got[k]
				if !ok {
					t.Fatalf("step %s not stored", k)
				}
				letter, idx := w[:len(w)-1], w[len(w)-1:]
				id := p[0].(string)
				if len(letter) > 1 && id != letter { // an explicit id is the task id
					t.Errorf("step %s in task %s, want %s", k, id, letter)
				}
				if prev, ok := letters[letter]; ok && prev != id {
					t.Errorf("step %s in task %s, want the task of the other %s steps (%s)", k, id, letter, prev)
				}
				if prev, ok := ids[id]; ok && prev != letter {
					t.Errorf("step %s shares task %s with %s steps, want a task of its own", k, id, prev)
				}
				letters[letter], ids[id] = id, letter
				if fmt.Sprint(p[1]) != idx {
					t.Errorf("step %s has index %v, want %s", k, p[1], idx)
				}
			}
		})
	}
}

func TestFinality(t *testing.T) {
	ctx := context.Background()
	final := func(t *testing.T, st *Store, id string) bool {
		t.Helper()
		task, err := st.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return task.Final
	}
	taskOf := func(t *testing.T, st *Store, key string) string {
		t.Helper()
		return placement(t, st)[key][0].(string)
	}

	t.Run("all sessions closed", func(t *testing.T) {
		clk := tasktest.NewClock(t0)
		st := openTestStore(t, t.TempDir(), clk)
		defer st.Close()
		ingest(t, st, stdio(step("fs", 1, 0), "s1", 100), stdio(step("git", 1, 0), "s2", 100))
		id := taskOf(t, st, "fs/1")
		if got, _ := st.CloseSession(ctx, "s1", "", nil); len(got) != 0 || final(t, st, id) {
			t.Fatalf("final with session s2 still open (%v)", got)
		}
		got, err := st.CloseSession(ctx, "s2", "", nil)
		if err != nil || len(got) != 1 || got[0] != id || !final(t, st, id) {
			t.Fatalf("CloseSession(s2) = %v, %v; want %s final", got, err, id)
		}
		if unq, _ := st.Unqueued(ctx); len(unq) != 1 || unq[0] != id {
			t.Fatalf("Unqueued = %v", unq)
		}
		if err := st.MarkQueued(ctx, id); err != nil {
			t.Fatal(err)
		}
		if unq, _ := st.Unqueued(ctx); len(unq) != 0 {
			t.Fatalf("Unqueued after MarkQueued = %v", unq)
		}
		if task, _ := st.Task(ctx, id); task.Reflection != "pending" {
			t.Fatalf("reflection = %q, want pending", task.Reflection)
		}
	})

	t.Run("idle past the gap", func(t *testing.T) {
		clk := tasktest.NewClock(t0)
		st := openTestStore(t, t.TempDir(), clk)
		defer st.Close()
		ingest(t, st, stdio(step("fs", 1, 0), "s1", 100))
		id := taskOf(t, st, "fs/1")
		clk.Set(t0.Add(9 * time.Minute))
		if got, _ := st.FinalizeIdle(ctx); len(got) != 0 {
			t.Fatalf("final after 9 minutes: %v", got)
		}
		clk.Set(t0.Add(11 * time.Minute))
		if got, _ := st.FinalizeIdle(ctx); len(got) != 1 || !final(t, st, id) {
			t.Fatalf("not final after 11 minutes: %v", got)
		}
	})

	t.Run("late delivery counts as activity", func(t *testing.T) {
		// Steps buffered for an hour in an outbox arrive now: the task is
		// not final until the gap has passed since they arrived.
		clk := tasktest.NewClock(t0.Add(time.Hour))
		st := openTestStore(t, t.TempDir(), clk)
		defer st.Close()
		ingest(t, st, stdio(step("fs", 1, 0), "s1", 100))
		if got, _ := st.FinalizeIdle(ctx); len(got) != 0 {
			t.Fatalf("final right after a late delivery: %v", got)
		}
		clk.Set(t0.Add(time.Hour + 11*time.Minute))
		if got, _ := st.FinalizeIdle(ctx); len(got) != 1 {
			t.Fatalf("not final a gap after delivery: %v", got)
		}
	})

	t.Run("a close waits for the session's last step", func(t *testing.T) {
		clk := tasktest.NewClock(t0)
		st := openTestStore(t, t.TempDir(), clk)
		defer st.Close()
		ingest(t, st, stdio(step("fs", 1, 0), "s1", 100))
		id := taskOf(t, st, "fs/1")
		last := uint64(3)
		if got, _ := st.CloseSession(ctx, "s1", "fs", &last); len(got) != 0 {
			t.Fatalf("final before step 3 arrived: %v", got)
		}
		ingest(t, st, stdio(step("fs", 2, time.Second), "s1", 100))
		if got, _ := st.FinalizeIdle(ctx); len(got) != 0 {
			t.Fatalf("final before step 3 arrived: %v", got)
		}
		ingest(t, st, stdio(step("fs", 3, 2*time.Second), "s1", 100))
		if got, _ := st.FinalizeIdle(ctx); len(got) != 1 || !final(t, st, id) {
			t.Fatalf("not final after the last step: %v", got)
		}
	})

	t.Run("a late step reopens a final task", func(t *testing.T) {
		clk := tasktest.NewClock(t0)
		st := openTestStore(t, t.TempDir(), clk)
		defer st.Close()
		ingest(t, st, stdio(step("fs", 1, 0), "s1", 100), stdio(step("git", 1, 0), "s2", 100))
		id := taskOf(t, st, "fs/1")
		st.CloseSession(ctx, "s1", "", nil)
		st.CloseSession(ctx, "s2", "", nil)
		if !final(t, st, id) {
			t.Fatal("not final")
		}
		st.MarkQueued(ctx, id)
		// A third sidecar of the same host, within the gap.
		ingest(t, st, stdio(step("mem", 1, time.Minute), "s3", 100))
		if taskOf(t, st, "mem/1") != id || final(t, st, id) {
			t.Fatal("late step did not reopen the task")
		}
		if got, _ := st.CloseSession(ctx, "s3", "", nil); len(got) != 1 {
			t.Fatalf("not final again: %v", got)
		}
		if unq, _ := st.Unqueued(ctx); len(unq) != 1 {
			t.Fatalf("reopened task not handed to reflection again: %v", unq)
		}
	})
}

func TestStoreSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := tasktest.NewClock(t0)
	st := openTestStore(t, dir, clk)
	ingest(t, st, stdio(step("fs", 1, 0), "s1", 100), stdio(step("fs", 2, time.Second), "s1", 100),
		httpStep(step("web", 1, 0), "h1"))
	before := placement(t, st)
	st.CloseSession(ctx, "h1", "", nil)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openTestStore(t, dir, clk)
	defer st.Close()
	after := placement(t, st)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("steps changed across restart:\n%v\n%v", before, after)
	}
	// Dedupe, segmentation and indices carry on where they were.
	res := ingest(t, st, stdio(step("fs", 2, time.Second), "s1", 100), stdio(step("fs", 3, 2*time.Second), "s1", 100))
	if res.Accepted != 1 || res.Duplicates != 1 {
		t.Fatalf("after restart: %+v", res)
	}
	p := placement(t, st)
	if p["fs/3"][0] != p["fs/1"][0] || p["fs/3"][1] != 2 {
		t.Fatalf("fs/3 placed at %v, want index 2 of %v", p["fs/3"], p["fs/1"][0])
	}
	tasks, _ := st.Tasks(ctx, TaskFilter{})
	finals := 0
	for _, task := range tasks {
		if task.Final {
			finals++
		}
	}
	if len(tasks) != 2 || finals != 1 {
		t.Fatalf("tasks after restart: %+v", tasks)
	}
}

func TestTaskNotFound(t *testing.T) {
	st := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer st.Close()
	if _, err := st.Task(context.Background(), "nope"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("Task(nope) = %v, want ErrNotFound", err)
	}
	if err := st.SetReflection(context.Background(), "nope", "done"); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("SetReflection(nope) = %v, want ErrNotFound", err)
	}
}

func TestIngestBatchLargerThanATransaction(t *testing.T) {
	// A task's steps of one batch are stored under one key, and their
	// bodies in the value log: a batch is too large for one transaction
	// when it has many tasks and the memtable is small.
	st, err := Open(t.TempDir(), Options{Logger: quiet, Now: (tasktest.NewClock(t0)).Now,
		Badger: func(o *badger.Options) { o.MemTableSize = 256 << 10 }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const jobs = 300
	big := json.RawMessage(`{"text":"` + strings.Repeat("y", 8<<10) + `"}`)
	huge := json.RawMessage(`{"text":"` + strings.Repeat("z", 3<<20) + `"}`)
	batch := make([]hindsight.Step, 1500)
	for i := range batch {
		batch[i] = explicit(stdio(step("big", uint64(i+1), time.Duration(i)*time.Millisecond), "s1", 100), fmt.Sprintf("job-%d", i%jobs))
		batch[i].Arguments, batch[i].Result, batch[i].Response = big, big, big
	}
	batch[700].Result = huge
	raws, err := wire.EncodeSteps(batch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ingestOnce(context.Background(), raws); !errors.Is(err, badger.ErrTxnTooBig) {
		t.Fatalf("one transaction: %v; want it too big", err)
	}
	res := ingest(t, st, batch...)
	if res.Accepted != len(batch) {
		t.Fatalf("accepted %d of %d", res.Accepted, len(batch))
	}
	if res := ingest(t, st, batch...); res.Duplicates != len(batch) {
		t.Fatalf("redelivery: %+v", res)
	}
	p := placement(t, st)
	for i := range batch {
		got := p[fmt.Sprintf("big/%d", i+1)]
		if want := fmt.Sprintf("job-%d", i%jobs); got[0] != want || got[1] != i/jobs {
			t.Fatalf("step %d placed at %v, want index %d of %s", i+1, got, i/jobs, want)
		}
	}
	full, err := st.Task(context.Background(), fmt.Sprintf("job-%d", 700%jobs))
	if err != nil || full.StepCount != len(batch)/jobs || len(full.Steps[700/jobs].Result) != len(huge) {
		t.Fatalf("task: %d steps, %v", full.StepCount, err)
	}
}

// TestIngestOutOfOrder covers dedupe below a source's high-water mark, where
// Ingest cannot tell a new step from a redelivery without looking, across a
// restart that empties the in-memory marks.
func TestIngestOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	clk := tasktest.NewClock(t0)
	st := openTestStore(t, dir, clk)
	at := func(seq uint64) hindsight.Step {
		return stdio(step("a", seq, time.Duration(seq)*time.Second), "s1", 100)
	}
	for _, c := range []struct {
		seqs           []uint64
		accepted, dups int
	}{
		{[]uint64{5}, 1, 0},
		{[]uint64{2, 2, 5}, 1, 2},
		{[]uint64{3, 6, 1}, 3, 0},
	} {
		var batch []hindsight.Step
		for _, s := range c.seqs {
			batch = append(batch, at(s))
		}
		if res := ingest(t, st, batch...); res.Accepted != c.accepted || res.Duplicates != c.dups {
			t.Fatalf("seqs %v: %+v, want %d accepted, %d duplicates", c.seqs, res, c.accepted, c.dups)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openTestStore(t, dir, clk)
	defer st.Close()
	if res := ingest(t, st, at(1), at(2), at(3), at(4), at(5), at(6), at(7)); res.Accepted != 2 || res.Duplicates != 5 {
		t.Fatalf("after restart: %+v, want 2 accepted (4 and 7), 5 duplicates", res)
	}
	p := placement(t, st)
	if len(p) != 7 {
		t.Fatalf("stored %d steps, want 7: %v", len(p), p)
	}
	seen := map[any]bool{}
	for k, v := range p {
		if v[0] != p["a/5"][0] || seen[v[1]] {
			t.Fatalf("step %s placed at %v: %v", k, v, p)
		}
		seen[v[1]] = true
	}
	for i := range 7 {
		if !seen[i] {
			t.Fatalf("no step at index %d: %v", i, p)
		}
	}
}

// TestStoreSyncsWrites checks that ingest leaves the store marked for
// the sync loop, and that the loop syncs it within its interval.
func TestStoreSyncsWrites(t *testing.T) {
	ts, err := Open(t.TempDir(), Options{SyncInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if ts.dirty.Load() {
		t.Fatal("a fresh store is marked for sync")
	}
	if _, err := ts.Ingest(context.Background(), []hindsight.Step{step("s1", 1, 0)}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ts.dirty.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sync loop did not sync the ingested batch")
		}
	}
}
