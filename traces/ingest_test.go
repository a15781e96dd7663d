package traces

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/wire"
)

// batchJSON encodes steps as a step batch, whole, as a sidecar sends them.
func batchJSON(t testing.TB, steps []hindsight.Step) []byte {
	t.Helper()
	return tasktest.BatchJSON(t, steps, wire.AppendStep)
}

// richSteps are steps with every field of a Step set.
func richSteps() []hindsight.Step {
	s := tasktest.GoldenSteps()
	s[0].Error = &hindsight.RPCError{Code: -32000, Message: "boom <&>", Data: json.RawMessage(`{"why":"x"}`)}
	s[0].Injected = []hindsight.Injection{{Channel: "instructions", ExperienceIDs: []string{"e1", "e2"}, Tokens: 12}}
	s[0].Truncated = []hindsight.Truncation{{Field: "result", OriginalSize: 99999, SHA256: "ab"}}
	s[0].Local, s[0].ClientName, s[0].ClientVersion, s[0].ProtocolVersion = true, "claude", "1.0", "2025-06-18"
	s[0].Request = json.RawMessage("{\"jsonrpc\":\"2.0\",\n \"id\":1}")
	s[0].Response = json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{"a":[1,2.5e-3,true,null,"\u00e9\n"]}}`)
	s[1].Redactions, s[1].Notifications, s[1].ErrorCode = 3, 2, "EACCES"
	s[1].StartedAt = s[1].StartedAt.In(time.FixedZone("", 2*3600))
	s[2].LatencyMS = 1e-9
	s[3].Transport, s[3].HostPID, s[3].Namespace = "streamable-http", 0, "team"
	return s
}

// TestRedeliveryOfPartlyStoredBatch: a batch whose first part was stored
// (a delivery whose answer was lost after a part committed, or an outbox
// that sent some steps alone) is completed by its redelivery, through the
// API as a sidecar sends it: nothing twice, nothing missing, the same
// order, indices and timestamps as one delivery would give.
func TestRedeliveryOfPartlyStoredBatch(t *testing.T) {
	ctx := context.Background()
	batch := make([]hindsight.Step, 40)
	for i := range batch {
		s := stdio(step("sc", uint64(i+1), time.Duration(i)*time.Second), "s1", 77)
		s.StartedAt = s.StartedAt.Add(123456789 * time.Nanosecond) // keeps its nanoseconds
		s.Result = json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("y", 600+i) + `"}]}`)
		if i%7 == 3 {
			s.CausalTag, s.IsError = hindsight.TagFailure, true
		}
		batch[i] = s
	}
	export := func(t *testing.T, st *Store) (string, []hindsight.Task) {
		t.Helper()
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		if err := st.Steps(ctx, nil, func(s *hindsight.Step) error { return enc.Encode(s) }); err != nil {
			t.Fatal(err)
		}
		tasks, err := st.Tasks(ctx, TaskFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return buf.String(), tasks
	}

	once := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer once.Close()
	if res := postSteps(t, once, batch); res.Accepted != len(batch) {
		t.Fatalf("one delivery: %+v", res)
	}
	wantExport, wantTasks := export(t, once)

	for _, cut := range []int{1, 17, 39, 40} {
		srv := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
		if res := postSteps(t, srv, batch[:cut]); res.Accepted != cut {
			t.Fatalf("cut %d: first part: %+v", cut, res)
		}
		if res := postSteps(t, srv, batch); res.Accepted != len(batch)-cut || res.Duplicates != cut {
			t.Fatalf("cut %d: redelivery: %+v; want %d accepted, %d duplicates", cut, res, len(batch)-cut, cut)
		}
		gotExport, gotTasks := export(t, srv)
		if len(gotTasks) != 1 || len(wantTasks) != 1 {
			t.Fatalf("cut %d: %d tasks; one delivery made %d", cut, len(gotTasks), len(wantTasks))
		}
		// Task ids are random: compare all else.
		gotExport = strings.ReplaceAll(gotExport, gotTasks[0].ID, wantTasks[0].ID)
		gotTasks[0].ID = wantTasks[0].ID
		if gotExport != wantExport {
			t.Errorf("cut %d: export differs from one delivery's:\n%s\nwant:\n%s", cut, gotExport, wantExport)
		}
		if !reflect.DeepEqual(gotTasks, wantTasks) {
			t.Errorf("cut %d: tasks %+v; want %+v", cut, gotTasks, wantTasks)
		}
		srv.Close()
	}

	// What is read back is what was sent, task id and index aside.
	task, err := once.Task(ctx, wantTasks[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range task.Steps {
		want := batch[i]
		want.TaskID, want.StepIndex = task.ID, i
		if !s.StartedAt.Equal(want.StartedAt) || !s.EndedAt.Equal(want.EndedAt) {
			t.Fatalf("step %d: times %v, %v; sent %v, %v", i, s.StartedAt, s.EndedAt, want.StartedAt, want.EndedAt)
		}
		s.StartedAt, s.EndedAt, want.StartedAt, want.EndedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(s, want) {
			t.Fatalf("step %d: read %+v; sent %+v", i, s, want)
		}
	}
	if task.FailureCount != 6 || task.StepCount != len(batch) {
		t.Errorf("task counts %d steps, %d failures; want %d, 6", task.StepCount, task.FailureCount, len(batch))
	}
}

// TestIngestRunsOfSeqs: the store knows which seqs it holds by runs of
// consecutive seqs; seqs missing below a source's high-water mark (steps
// set aside by a sidecar, then delivered after all) fill in, redeliveries
// of any part are duplicates, across a restart too, and a store written
// before runs (a seq key per step) still knows its steps.
func TestIngestRunsOfSeqs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openTestStore(t, dir, tasktest.NewClock(t0))
	seqs := func(from, to uint64) []hindsight.Step {
		var out []hindsight.Step
		for q := from; q <= to; q++ {
			out = append(out, stdio(step("sc", q, time.Duration(q)*time.Second), "s1", 9))
		}
		return out
	}
	check := func(t *testing.T, st *Store, steps []hindsight.Step, accepted, dups int) {
		t.Helper()
		res, err := st.Ingest(ctx, steps)
		if err != nil || res.Accepted != accepted || res.Duplicates != dups {
			t.Fatalf("ingest %d steps: %+v, %v; want %d accepted, %d duplicates", len(steps), res, err, accepted, dups)
		}
	}
	check(t, st, seqs(1, 5), 5, 0)
	check(t, st, seqs(10, 12), 3, 0)                      // 6…9 missing
	check(t, st, append(seqs(3, 4), seqs(7, 7)...), 1, 2) // 7 fills in
	check(t, st, seqs(1, 13), 4, 9)                       // 6, 8, 9 and 13 are new
	check(t, st, seqs(1, 13), 0, 13)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openTestStore(t, dir, tasktest.NewClock(t0))
	defer st.Close()
	check(t, st, seqs(1, 14), 1, 13)
	// One batch with a step twice, a redelivered one and new ones.
	check(t, st, append(seqs(15, 16), append(seqs(15, 15), seqs(2, 2)...)...), 2, 2)
	// Indices in order of arrival, whatever was stored under one key.
	var order []uint64
	if err := st.Steps(ctx, nil, func(s *hindsight.Step) error {
		if s.StepIndex != len(order) {
			t.Fatalf("step %s/%d has index %d; want %d", s.Source, s.Seq, s.StepIndex, len(order))
		}
		order = append(order, s.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 2, 3, 4, 5, 10, 11, 12, 7, 6, 8, 9, 13, 14, 15, 16}; !reflect.DeepEqual(order, want) {
		t.Errorf("steps in order %v; want %v", order, want)
	}

	// A store from before runs: hw/ and a seq/ key per step.
	err := st.DB().Update(func(txn *badger.Txn) error {
		for q := uint64(1); q <= 5; q++ {
			if err := txn.Set(key(pSeq, []byte("old"), u64(q)), []byte("t-x\x000")); err != nil {
				return err
			}
		}
		return txn.Set(key(pHW, []byte("old")), u64(5))
	})
	if err != nil {
		t.Fatal(err)
	}
	old := func(from, to uint64) []hindsight.Step {
		var out []hindsight.Step
		for q := from; q <= to; q++ {
			out = append(out, step("old", q, time.Duration(q)*time.Second))
		}
		return out
	}
	st.mu.Lock()
	delete(st.hw, "old")
	st.mu.Unlock()
	check(t, st, old(3, 8), 3, 3)
	check(t, st, old(1, 9), 1, 8)

	tasks, err := st.Tasks(ctx, TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, task := range tasks {
		total += task.StepCount
	}
	if total != 16+4 {
		t.Errorf("%d steps stored; want 20", total)
	}
}

func TestIngestRaw(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer st.Close()
	var raws []json.RawMessage
	for _, s := range richSteps() {
		b, err := wire.AppendStep(nil, &s)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, b)
	}
	// Another encoder's spelling of a step: decoded, stored re-encoded.
	raws = append(raws, json.RawMessage(`{"SOURCE":"other","Seq":7,"started_at":"2026-11-30T09:00:00Z"}`))
	if err := st.DeliverRaw(ctx, raws); err != nil {
		t.Fatal(err)
	}
	res, err := st.IngestRaw(ctx, raws)
	if err != nil || res.Duplicates != len(raws) {
		t.Fatalf("redelivery: %+v, %v", res, err)
	}
	var got []hindsight.Step
	if err := st.Steps(ctx, nil, func(s *hindsight.Step) error { got = append(got, *s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(raws) {
		t.Fatalf("%d steps stored; want %d", len(got), len(raws))
	}
	for _, bad := range []string{`{"source":"a","seq":"1"}`, `{"source":"a/b","seq":1}`, `[1]`} {
		_, err := st.IngestRaw(ctx, []json.RawMessage{json.RawMessage(bad)})
		if !errors.Is(err, ErrRejected) {
			t.Errorf("IngestRaw(%s) = %v; want ErrRejected", bad, err)
		}
	}
}

// TestIngestSeesTaskUpdates: a batch that continues a task sees what was
// written to its record since the last batch (the store caches the
// latest task of each group between batches).
func TestIngestSeesTaskUpdates(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer st.Close()
	ingest(t, st, stdio(step("fs", 1, 0), "s1", 100), stdio(step("fs", 2, time.Second), "s1", 100))
	taskOf := func(key string) string { return placement(t, st)[key][0].(string) }
	id := taskOf("fs/1")
	if err := st.SetReflection(ctx, id, "failed"); err != nil {
		t.Fatal(err)
	}
	ingest(t, st, stdio(step("fs", 3, 2*time.Second), "s1", 100))
	if taskOf("fs/3") != id {
		t.Fatal("the third step started a task of its own")
	}
	task, err := st.Task(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if task.Reflection != "failed" || task.StepCount != 3 {
		t.Errorf("task: reflection %q, %d steps; want failed, 3", task.Reflection, task.StepCount)
	}
}

// TestChunks: a batch's steps of one task are stored under one key, split
// when large; steps of tasks interleaved in a batch, steps stored one at a
// time and in chunks all read back in index order.
func TestChunks(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer st.Close()
	body := json.RawMessage(`{"text":"` + strings.Repeat("c", maxChunk/20) + `"}`)
	var batch []hindsight.Step
	for i := range 60 { // three maxChunks for host 1: three chunks or more
		s := stdio(step("a", uint64(i+1), time.Duration(i)*time.Second), "s1", 1)
		s.Result = body
		batch = append(batch, s, stdio(step("b", uint64(i+1), time.Duration(i)*time.Second), "s2", 2))
	}
	ingest(t, st, batch[:1]...) // one step alone first
	if res := postSteps(t, st, batch); res.Accepted != len(batch)-1 || res.Duplicates != 1 {
		t.Fatalf("ingest: %+v", res)
	}
	// Steps of one task, with a redelivered one amid new ones.
	more := []hindsight.Step{batch[120-2], stdio(step("b", 61, 60*time.Second), "s2", 2), batch[3], stdio(step("b", 62, 61*time.Second), "s2", 2)}
	if res := postSteps(t, st, more); res.Accepted != 2 || res.Duplicates != 2 {
		t.Fatalf("ingest: %+v", res)
	}
	chunks := 0
	err := st.DB().View(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.Prefix = pStep
		it := txn.NewIterator(opt)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			chunks++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if chunks < 5 || chunks > 10 {
		t.Errorf("%d keys for 120 steps of two tasks; want a few chunks", chunks)
	}
	tasks, err := st.Tasks(ctx, TaskFilter{})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("tasks: %v, %v", tasks, err)
	}
	for _, task := range tasks {
		full, err := st.Task(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := 60 + 2*strings.Count(full.Steps[0].Source, "b"); len(full.Steps) != want {
			t.Fatalf("task %s: %d steps", task.ID, len(full.Steps))
		}
		for i, s := range full.Steps {
			if s.StepIndex != i || s.Seq != uint64(i+1) || s.TaskID != task.ID {
				t.Fatalf("task %s: step %d is %s/%d at index %d of %s", task.ID, i, s.Source, s.Seq, s.StepIndex, s.TaskID)
			}
			if s.Source == "a" && len(s.Result) != len(body) {
				t.Fatalf("step %d: result of %d bytes", i, len(s.Result))
			}
		}
	}
}

// TestDeepStep: a step nested deeper than the one-pass reader follows is
// stored and read back (through encoding/json).
func TestDeepStep(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t, t.TempDir(), tasktest.NewClock(t0))
	defer st.Close()
	deep := json.RawMessage(strings.Repeat(`{"a":[`, 600) + `1` + strings.Repeat(`]}`, 600))
	batch := []hindsight.Step{step("d", 1, 0), step("d", 2, time.Second), step("d", 3, 2*time.Second)}
	batch[1].Result = deep
	postSteps(t, st, batch)
	tasks, err := st.Tasks(ctx, TaskFilter{})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks: %v, %v", tasks, err)
	}
	task, err := st.Task(ctx, tasks[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Steps) != 3 || !bytes.Equal(task.Steps[1].Result, deep) || task.Steps[2].Seq != 3 {
		t.Fatalf("read back %d steps", len(task.Steps))
	}
}

// postSteps delivers steps as a sidecar does: their batch's body decoded
// and ingested as the daemon's POST /v1/steps does.
func postSteps(t *testing.T, st *Store, steps []hindsight.Step) IngestResult {
	t.Helper()
	b, err := DecodeBatch(batchJSON(t, steps))
	if err == nil {
		err = b.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.IngestBatch(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	// The answer, as the daemon writes it and a sidecar reads it.
	var got IngestResult
	if err := json.Unmarshal(res.AppendJSON(nil), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestIngestResultJSON checks that a step batch's answer is what
// encoding/json's Encoder writes for it.
func TestIngestResultJSON(t *testing.T) {
	for _, r := range []IngestResult{{}, {Accepted: 1}, {Accepted: 64, Duplicates: 3}, {Accepted: -1, Duplicates: 1 << 40}} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(r.AppendJSON(nil)); got != string(want)+"\n" {
			t.Errorf("%+v: %q, want %q", r, got, want)
		}
	}
}
