package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

func benchOptions() Options { return Options{Now: func() time.Time { return benchset.RefTime }} }

// fillStore writes n synthetic experiences into a new store in dir, then
// updates and forgets a few (leaving dead slots), and closes it.
func fillStore(t testing.TB, dir string, n int) []benchset.Query {
	exps, qs := benchset.Synthetic(n, 40)
	s, err := Open(dir, embedder.NewLocal(0), benchOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range exps {
		e := exps[i]
		e.Version = 0
		if err := s.Put(ctx, &e); err != nil {
			t.Fatal(err)
		}
		exps[i] = e
	}
	for i := 0; i < len(exps); i += 7 {
		e := exps[i]
		e.Lesson += " (revised)"
		e.Deleted = i%14 == 0
		if err := s.Put(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordHits(ctx, "", []string{exps[1].ID, exps[2].ID}, benchset.RefTime); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return qs
}

// answers runs qs (unfiltered and filtered, with explanations) and
// renders the results, scores included.
func answers(t *testing.T, s *Store, qs []benchset.Query) []string {
	var out []string
	for _, bq := range qs {
		for _, filtered := range []bool{false, true} {
			q := hindsight.Query{Text: bq.Text, K: 5, NoHit: true, Explain: true, IncludeDeleted: filtered}
			if filtered {
				q.Tool, q.ErrorCode = bq.Tool, bq.ErrorCode
			}
			res, err := s.Search(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				out = append(out, fmt.Sprintf("%s v%d %.9f %+v %d", r.ID, r.Version, r.Score, *r.Explain, len(r.Vector)))
			}
			out = append(out, "--")
		}
	}
	list, err := s.List(context.Background(), hindsight.ListOptions{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		out = append(out, fmt.Sprintf("%s v%d hits %d", e.ID, e.Version, e.HitCount))
	}
	return out
}

// sameAnswers fails t at the first difference between want and got.
func sameAnswers(t *testing.T, want, got []string) {
	t.Helper()
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			t.Fatalf("answer %d differs:\nwant %s\ngot  %s", i, want[i], got[i])
		}
	}
	if len(want) != len(got) {
		t.Fatalf("%d answers, want %d", len(got), len(want))
	}
}

// reopen opens the store in dir without background checkpoints: the
// tests swap its index in and out.
func reopen(t *testing.T, dir string) *Store {
	t.Helper()
	opt := benchOptions()
	opt.CheckpointInterval = -1
	s, err := Open(dir, embedder.NewLocal(0), opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSnapshotStartup checks that a store closed cleanly starts from its
// snapshot and answers exactly as the index rebuilt from Badger does.
func TestSnapshotStartup(t *testing.T) {
	dir := t.TempDir()
	qs := fillStore(t, dir, 3000)
	snap := filepath.Join(dir, snapshotName)
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no snapshot after Close: %v", err)
	}
	s := reopen(t, dir)
	if !s.fromSnapshot {
		t.Fatal("open rebuilt the index although the snapshot matches")
	}
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("the snapshot went while the store is open: %v", err)
	}
	fromSnap := answers(t, s, qs)
	mapped := s.idx
	if err := s.load(); err != nil { // replaces s.idx with a rebuilt index
		t.Fatal(err)
	}
	sameAnswers(t, fromSnap, answers(t, s, qs))
	s.idx, mapped = mapped, s.idx

	// Writes land in chunks that point into the mapped snapshot: they
	// are copied first, and read back.
	ctx := context.Background()
	e := &hindsight.Experience{Tool: "zzyzx_tool", Situation: "zzyzx quokka failure", Lesson: "call zzyzx twice"}
	if err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	old, err := s.Get(ctx, "", qs[0].Want)
	if err != nil {
		t.Fatal(err)
	}
	old.Vector = nil
	old.Situation += " wombatish"
	if err := s.Put(ctx, old); err != nil {
		t.Fatal(err)
	}
	for id, text := range map[string]string{e.ID: "zzyzx quokka", old.ID: "wombatish"} {
		res, err := s.Search(ctx, hindsight.Query{Text: text, K: 1, NoHit: true, IncludeDeleted: true, IncludeSuperseded: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(res, func(r hindsight.ScoredExperience) bool { return r.ID == id }) {
			t.Fatalf("search after writes misses %s: %v", id, res)
		}
	}
	s.Close()
	_ = mapped
}

// TestSnapshotFaults damages the snapshot of a closed store in several
// ways: each time the store must notice, rebuild from Badger and answer
// as it did before.
func TestSnapshotFaults(t *testing.T) {
	dir := t.TempDir()
	qs := fillStore(t, dir, 1500)
	snap := filepath.Join(dir, snapshotName)
	good, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	s := reopen(t, dir)
	want := answers(t, s, qs)
	s.Close()
	faults := map[string]func(){
		"truncated": func() { os.WriteFile(snap, good[:len(good)/2], 0o600) },
		"empty":     func() { os.WriteFile(snap, nil, 0o600) },
		"bit flip":  func() { b := slices.Clone(good); b[len(b)/3] ^= 0x10; os.WriteFile(snap, b, 0o600) },
		"bad sum":   func() { b := slices.Clone(good); b[len(b)-1] ^= 1; os.WriteFile(snap, b, 0o600) },
		"garbage":   func() { os.WriteFile(snap, []byte("not a snapshot at all"), 0o600) },
		"another database": func() {
			// The same snapshot, but the database's generation changed
			// (as a Hindsight that predates replay does at every open).
			db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(genKey), bytes.Repeat([]byte{1}, 16)) })
			db.Close()
			os.WriteFile(snap, good, 0o600)
		},
	}
	for name, damage := range faults {
		t.Run(name, func(t *testing.T) {
			damage()
			s := reopen(t, dir)
			defer s.Close()
			if s.fromSnapshot {
				t.Fatal("the damaged snapshot was trusted")
			}
			sameAnswers(t, want, answers(t, s, qs))
		})
	}
}

// TestOpenWithoutSnapshot opens a store written before snapshots existed
// (no snapshot file, no generation in Badger): it rebuilds, and the
// next open starts from the snapshot its Close wrote.
func TestOpenWithoutSnapshot(t *testing.T) {
	dir := t.TempDir()
	qs := fillStore(t, dir, 500)
	s := reopen(t, dir)
	if err := s.db.DropPrefix([]byte(genKey)); err != nil {
		t.Fatal(err)
	}
	want := answers(t, s, qs)
	s.db.Close() // as an old version would leave it: no snapshot file
	os.Remove(filepath.Join(dir, snapshotName))
	s = reopen(t, dir)
	if s.fromSnapshot {
		t.Fatal("loaded a snapshot that does not exist")
	}
	sameAnswers(t, want, answers(t, s, qs))
	s.Close()
	s = reopen(t, dir)
	defer s.Close()
	if !s.fromSnapshot {
		t.Fatal("the second open rebuilt again")
	}
}

// TestSnapshotWrittenAfter changes a closed store's database directly, as
// a Hindsight that predates replay would: the snapshot is used, and the
// write replayed over it.
func TestSnapshotWrittenAfter(t *testing.T) {
	dir := t.TempDir()
	fillStore(t, dir, 300)
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	var e *hindsight.Experience
	if err := db.View(func(txn *badger.Txn) (err error) {
		e, err = readExp(txn, hindsight.DefaultNamespace, "exp-0003")
		return err
	}); err != nil || e == nil {
		t.Fatalf("read exp-0003: %v", err)
	}
	e.Tool = "renamed_tool"
	b, _ := json.Marshal(e)
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(expKey(e.Namespace, e.ID), b) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := reopen(t, dir)
	defer s.Close()
	if !s.fromSnapshot || !s.replayScanned || !s.checkpointDue(s.idx.live) {
		t.Fatalf("from snapshot %v, tables scanned %v, checkpoint due %v; want the snapshot, a scan (no change key) and a checkpoint due",
			s.fromSnapshot, s.replayScanned, s.checkpointDue(s.idx.live))
	}
	res, err := s.Search(context.Background(), hindsight.Query{Tool: "renamed_tool", NoHit: true, IncludeDeleted: true})
	if err != nil || len(res) != 1 || res[0].ID != "exp-0003" {
		t.Fatalf("search by the new tool: %v %v", res, err)
	}
}

// crash stops s as a killed process would leave it: no checkpoint, no
// snapshot at Close (Badger's own files are as its synchronous writes
// left them).
func crash(s *Store) {
	s.stopCheckpoints()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.db.Close()
}

// TestSnapshotReplay writes to a store that started from its snapshot
// (new experiences, changed ones, counted hits, a purge), takes a
// checkpoint halfway, and stops it without Close: the next open starts
// from the checkpoint, replays only what was written after it, and
// answers exactly as the index rebuilt from Badger does.
func TestSnapshotReplay(t *testing.T) {
	dir := t.TempDir()
	qs := fillStore(t, dir, 1500)
	s := reopen(t, dir)
	ctx := context.Background()
	list, err := s.List(ctx, hindsight.ListOptions{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		relesson(t, s, list[i], "before the checkpoint "+fmt.Sprint(i))
	}
	if n, err := s.Purge(ctx, "", []string{list[50].ID}); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if err := s.checkpoint(true); err != nil {
		t.Fatal(err)
	}
	if n := changeKeys(t, s); n != 0 {
		t.Fatalf("%d change keys after a checkpoint over a snapshot that covers every write; want 0", n)
	}
	for i := range 30 {
		relesson(t, s, list[100+i], "quokka after the checkpoint "+fmt.Sprint(i))
	}
	relesson(t, s, hindsight.Experience{ID: "brand-new", Situation: "wombat stampede", Lesson: "close the gate"}, "close the gate")
	if _, err := s.Search(ctx, hindsight.Query{Text: qs[0].Text, K: 5}); err != nil { // counts hits
		t.Fatal(err)
	}
	if err := s.RecordHits(ctx, "", []string{list[1].ID, list[2].ID}, benchset.RefTime); err != nil {
		t.Fatal(err)
	}
	if n := changeKeys(t, s); n < 31 {
		t.Fatalf("%d change keys after 31 experiences were written; want at least 31", n)
	}
	crash(s)

	s = reopen(t, dir)
	defer s.Close()
	if !s.fromSnapshot || s.replayScanned {
		t.Fatalf("from snapshot %v, tables scanned %v; want a replay of the change keys", s.fromSnapshot, s.replayScanned)
	}
	// 30 changed, 1 new, the hits of the search (up to 5) and 2 more.
	if n := s.dirty.Load(); n < 31 || n > 38 {
		t.Fatalf("replayed %d experiences, want 31 to 38", n)
	}
	for _, text := range []string{"wombat stampede", "quokka after the checkpoint 29", "before the checkpoint 39"} {
		res, err := s.Search(ctx, hindsight.Query{Text: text, K: 3, NoHit: true, IncludeDeleted: true})
		if err != nil || len(res) == 0 || !strings.Contains(res[0].Lesson+res[0].Situation, strings.Fields(text)[0]) {
			t.Fatalf("search %q after the replay: %v %v", text, res, err)
		}
	}
	if _, err := s.Get(ctx, "", list[50].ID); err == nil {
		t.Fatal("the purged experience came back")
	}
	replayed := s.idx
	if err := s.load(); err != nil {
		t.Fatal(err)
	}
	sameIndex(t, s.idx, replayed)
	s.idx, replayed = replayed, s.idx
}

// TestCheckpointInterrupted: a checkpoint deletes the change keys the
// snapshot on disk covers before it writes the next one; a crash in
// between replays the writes after that snapshot from the change keys
// left, and answers as the index rebuilt from Badger does. The next
// checkpoint's deletions fall below its snapshot: a start after it
// replays nothing.
func TestCheckpointInterrupted(t *testing.T) {
	dir := t.TempDir()
	s, list := reopenFilled(t, dir, 300)
	ctx := context.Background()
	for i := range 20 {
		relesson(t, s, list[i], "numbat lesson "+fmt.Sprint(i))
	}
	if err := s.checkpoint(true); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		relesson(t, s, list[50+i], "bilby lesson "+fmt.Sprint(i))
	}
	// The next checkpoint's first half, then a crash.
	if err := s.dropChanges(s.covers.Load()); err != nil {
		t.Fatal(err)
	}
	if n := changeKeys(t, s); n != 20 {
		t.Fatalf("%d change keys after the covered ones went; want the 20 written since (10 records, their vectors)", n)
	}
	crash(s)

	s = reopen(t, dir)
	if !s.fromSnapshot || s.replayScanned || s.dirty.Load() != 10 {
		t.Fatalf("from snapshot %v, tables scanned %v, %d replayed; want the snapshot and 10 from change keys",
			s.fromSnapshot, s.replayScanned, s.dirty.Load())
	}
	replayed := s.idx
	if err := s.load(); err != nil {
		t.Fatal(err)
	}
	sameIndex(t, s.idx, replayed)
	s.idx = replayed
	if err := s.checkpoint(true); err != nil {
		t.Fatal(err)
	}
	crash(s)

	s = reopen(t, dir)
	defer s.Close()
	if !s.fromSnapshot || s.replayScanned || s.dirty.Load() != 0 {
		t.Fatalf("from snapshot %v, tables scanned %v, %d replayed; want the snapshot and nothing", s.fromSnapshot, s.replayScanned, s.dirty.Load())
	}
	res, err := s.Search(ctx, hindsight.Query{Text: "bilby lesson 9", K: 1, NoHit: true})
	if err != nil || len(res) != 1 || res[0].Lesson != "bilby lesson 9" {
		t.Fatalf("search after the restarts: %v %v", res, err)
	}
}

// reopenFilled fills a store in dir with n experiences (fillStore),
// opens it again from its snapshot and returns it with their list.
func reopenFilled(t *testing.T, dir string, n int) (*Store, []hindsight.Experience) {
	t.Helper()
	fillStore(t, dir, n)
	s := reopen(t, dir)
	list, err := s.List(context.Background(), hindsight.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, list
}

// relesson puts e into s with lesson as its lesson (and no vector, so
// that the store embeds it again).
func relesson(t *testing.T, s *Store, e hindsight.Experience, lesson string) {
	t.Helper()
	e.Vector, e.Lesson = nil, lesson
	if err := s.Put(context.Background(), &e); err != nil {
		t.Fatal(err)
	}
}

// changeKeys counts the change keys (records and vectors) s's database
// holds.
func changeKeys(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte("chg/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sameIndex fails t unless got holds the experiences of want, each with
// the same filter and ranking fields, terms and vector. (Answers may
// still differ slightly: dead slots count in a term's document frequency
// until the index is compacted.)
func sameIndex(t *testing.T, want, got *index) {
	t.Helper()
	if want.live != got.live || want.totalLen != got.totalLen {
		t.Fatalf("%d live, %d terms in all; want %d, %d", got.live, got.totalLen, want.live, want.totalLen)
	}
	terms := func(x *index) map[int32][]string {
		m := map[int32][]string{}
		for term, ps := range x.postings {
			for slot, tf := range ps.all() {
				if x.docs[slot].live {
					m[slot] = append(m[slot], fmt.Sprintf("%s×%d", term, tf))
				}
			}
		}
		for _, v := range m {
			slices.Sort(v)
		}
		return m
	}
	wt, gt := terms(want), terms(got)
	for k, ws := range want.byKey {
		gs, ok := got.byKey[k]
		if !ok || !got.docs[gs].live {
			t.Fatalf("%q is missing", k)
		}
		wd, gd := want.docs[ws], got.docs[gs]
		strs := func(x *index, d doc) string {
			return fmt.Sprint(x.names[d.ns], x.names[d.server], x.names[d.tool], x.names[d.task], x.names[d.code], x.names[d.template])
		}
		wd.ns, wd.server, wd.tool, wd.task, wd.code, wd.template = 0, 0, 0, 0, 0, 0
		wdStr, gdStr := strs(want, want.docs[ws]), strs(got, got.docs[gs])
		gd.ns, gd.server, gd.tool, gd.task, gd.code, gd.template = 0, 0, 0, 0, 0, 0
		if wd != gd || wdStr != gdStr {
			t.Fatalf("%q: %+v %s, want %+v %s", k, gd, gdStr, wd, wdStr)
		}
		if !slices.Equal(wt[ws], gt[gs]) {
			t.Fatalf("%q: terms %v, want %v", k, gt[gs], wt[ws])
		}
		if wd.hasVec && (!slices.Equal(want.quantised(ws), got.quantised(gs)) || want.scales[ws] != got.scales[gs]) {
			t.Fatalf("%q: the vectors differ", k)
		}
	}
}

// TestSnapshotPurge purges from a store whose vectors are mapped from its
// snapshot: the index is rebuilt off the mapping, the purged experience
// is gone and the others still answer, and so after a restart.
func TestSnapshotPurge(t *testing.T) {
	dir := t.TempDir()
	qs := fillStore(t, dir, 1200)
	s := reopen(t, dir)
	if !s.fromSnapshot || s.idx.region == nil {
		t.Fatal("the store did not start from a mapped snapshot")
	}
	ctx := context.Background()
	gone := qs[0].Want
	if n, err := s.Purge(ctx, "", []string{gone}); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	check := func(s *Store) {
		t.Helper()
		if _, err := s.Get(ctx, "", gone); err == nil {
			t.Fatal("the purged experience is still there")
		}
		q := qs[1]
		res, err := s.Search(ctx, hindsight.Query{Text: q.Text, Tool: q.Tool, ErrorCode: q.ErrorCode, K: 5, NoHit: true, IncludeDeleted: true})
		if err != nil || len(res) == 0 {
			t.Fatalf("search after purge: %v %v", res, err)
		}
	}
	check(s)
	s.Close()
	s = reopen(t, dir)
	defer s.Close()
	check(s)
}

// TestCheckpointWhileWriting writes and searches (hits counted) while the
// background loop takes checkpoints every few milliseconds, then stops
// the store without Close: the next open replays over the last
// checkpoint and holds what a rebuild from Badger holds.
func TestCheckpointWhileWriting(t *testing.T) {
	dir := t.TempDir()
	opt := benchOptions()
	opt.CheckpointInterval = 5 * time.Millisecond
	s, err := Open(dir, embedder.NewLocal(0), opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exps, qs := benchset.Synthetic(1300, 20)
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := s.Search(ctx, hindsight.Query{Text: qs[i%len(qs)].Text, K: 5}); err != nil {
				done <- err
				return
			}
		}
	}()
	for i := range exps {
		e := exps[i]
		e.Version = 0
		if err := s.Put(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.covers.Load() == 0 {
		t.Fatal("no checkpoint was taken")
	}
	crashAndReplay(t, s, dir)
}

// crashAndReplay kills s as a SIGKILL would, reopens the store in dir and
// checks that it replayed over its last checkpoint into the index a
// rebuild from the database makes.
func crashAndReplay(t *testing.T, s *Store, dir string) {
	t.Helper()
	crash(s)
	s = reopen(t, dir)
	defer s.Close()
	if !s.fromSnapshot {
		t.Fatal("the store rebuilt instead of replaying over its checkpoint")
	}
	replayed := s.idx
	if err := s.load(); err != nil {
		t.Fatal(err)
	}
	sameIndex(t, s.idx, replayed)
	s.idx = replayed // the store keeps the index it opened with
}
