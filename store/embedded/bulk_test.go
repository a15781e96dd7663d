package embedded

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestPutBatch stores new and changed experiences in one batch across
// several chunks and transactions: each is stored, versioned and found
// as Put would leave it; a stale version fails its chunk, which stores
// nothing, while the chunks before it stay stored.
func TestPutBatch(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, embedder.NewLocal(0), benchOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	old := &hindsight.Experience{ID: "old", Situation: "kangaroo crossing", Lesson: "slow down"}
	if err := s.Put(ctx, old); err != nil {
		t.Fatal(err)
	}
	var batch []*hindsight.Experience
	for i := range 2*batchChunk + 10 {
		batch = append(batch, &hindsight.Experience{ID: fmt.Sprintf("b%04d", i), Tool: "tool_" + fmt.Sprint(i%7),
			Situation: fmt.Sprintf("situation number %d with platypus%d", i, i), Lesson: "lesson " + fmt.Sprint(i)})
	}
	changed := *old
	changed.Vector, changed.Lesson = nil, "slow down and honk"
	batch = append(batch, &changed)
	n, err := s.PutBatch(ctx, batch)
	if err != nil || n != len(batch) {
		t.Fatalf("put batch: %d of %d, %v", n, len(batch), err)
	}
	if changed.Version != 2 || batch[0].Version != 1 || batch[0].Embedder == "" {
		t.Fatalf("versions %d and %d, embedder %q: want 2, 1 and the store's", changed.Version, batch[0].Version, batch[0].Embedder)
	}
	for _, e := range []*hindsight.Experience{batch[0], batch[300], batch[len(batch)-2], &changed} {
		res, err := s.Search(ctx, hindsight.Query{Text: e.Situation + " " + e.Lesson, K: 1, NoHit: true})
		if err != nil || len(res) != 1 || res[0].ID != e.ID || res[0].Lesson != e.Lesson || res[0].Version != e.Version {
			t.Fatalf("search for %s: %+v %v", e.ID, res, err)
		}
	}
	if s.Len() != len(batch) {
		t.Fatalf("%d experiences, want %d", s.Len(), len(batch))
	}

	// The second chunk holds a stale version: the first chunk is stored.
	var again []*hindsight.Experience
	for i := range batchChunk + 1 {
		again = append(again, &hindsight.Experience{ID: fmt.Sprintf("c%04d", i), Situation: "echidna", Lesson: "dig"})
	}
	stale := changed
	stale.Version = 1
	again = append(again, &stale)
	n, err = s.PutBatch(ctx, again)
	if !errors.Is(err, hindsight.ErrConflict) || n != batchChunk {
		t.Fatalf("batch with a stale version: %d stored, %v; want %d and a conflict", n, err, batchChunk)
	}
	if _, err := s.Get(ctx, "", fmt.Sprintf("c%04d", batchChunk)); !errors.Is(err, hindsight.ErrNotFound) {
		t.Fatalf("the failed chunk stored something: %v", err)
	}
	if _, err := s.PutBatch(ctx, []*hindsight.Experience{{ID: "x", Lesson: "a"}, {ID: "x", Lesson: "b"}}); err == nil {
		t.Fatal("a batch with an id twice was taken")
	}
}

// TestBeginBulk checks that PutBatch calls within a bulk take no
// snapshot and, a checkpoint being due (a new store has no snapshot),
// write no change keys but the bulk marker; its end takes a snapshot
// covering them all and deletes the marker, so that a start after a
// crash loads it with nothing to replay.
func TestBeginBulk(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, embedder.NewLocal(0), benchOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	end := s.BeginBulk()
	for part := range 3 {
		var batch []*hindsight.Experience
		for i := range 50 {
			batch = append(batch, &hindsight.Experience{ID: fmt.Sprintf("k%d-%02d", part, i), Situation: fmt.Sprintf("wallaby %d %d", part, i), Lesson: "hop"})
		}
		if _, err := s.PutBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if c := s.covers.Load(); c != 0 {
			t.Fatalf("part %d: a snapshot covering version %d was taken within the bulk", part, c)
		}
		if n := changeKeys(t, s); n != 0 || !bulkMarked(t, s) {
			t.Fatalf("part %d: %d change keys, marker %v; want none and the marker", part, n, bulkMarked(t, s))
		}
	}
	end()
	end() // once
	if s.covers.Load() == 0 || s.dirty.Load() != 0 {
		t.Fatalf("after the bulk: snapshot covers %d, %d writes since; want one covering every write", s.covers.Load(), s.dirty.Load())
	}
	if bulkMarked(t, s) || s.marked {
		t.Fatal("the bulk marker is kept after the bulk's snapshot")
	}
	crash(s)
	s, err = Open(dir, embedder.NewLocal(0), benchOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.fromSnapshot || s.replayScanned || s.dirty.Load() != 0 || s.idx.live != 150 {
		t.Fatalf("reopened after a crash: from snapshot %v, tables scanned %v, %d replayed, %d live; want the bulk's snapshot with 150 and nothing to replay",
			s.fromSnapshot, s.replayScanned, s.dirty.Load(), s.idx.live)
	}
}

// TestBulkCrash stops a store as a SIGKILL would in the middle of a bulk:
// its first parts, before a checkpoint was due, wrote change keys; the
// rest wrote none, under the bulk marker. The next start scans the
// tables into the index a rebuild makes; its first checkpoint deletes
// the marker, after which a start replays change keys again.
func TestBulkCrash(t *testing.T) {
	dir := t.TempDir()
	s, list := reopenFilled(t, dir, 300)
	ctx := context.Background()
	before := changeKeys(t, s) // the fill's, which the next checkpoint deletes
	end := s.BeginBulk()
	defer end()
	for part := range 3 { // due at minCheckpoint writes: the third part marks
		var batch []*hindsight.Experience
		for i := range 500 {
			batch = append(batch, &hindsight.Experience{ID: fmt.Sprintf("q%d-%03d", part, i), Situation: fmt.Sprintf("quoll %d %d", part, i), Lesson: "climb"})
		}
		if part == 2 {
			for _, e := range list[:10] {
				c := e
				c.Vector, c.Lesson = nil, "changed within the bulk"
				batch = append(batch, &c)
			}
		}
		if _, err := s.PutBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if marked, want := bulkMarked(t, s), part == 2; marked != want {
			t.Fatalf("part %d: bulk marker %v; want %v", part, marked, want)
		}
	}
	if n := changeKeys(t, s) - before; n != 2*1000 {
		t.Fatalf("%d change keys; want 2000 (the two parts before a checkpoint was due)", n)
	}
	crash(s)

	s = reopen(t, dir)
	if !s.fromSnapshot || !s.replayScanned || !s.marked || s.idx.live != 300+1500 {
		t.Fatalf("from snapshot %v, tables scanned %v, marked %v, %d live; want a scan over the snapshot to 1800",
			s.fromSnapshot, s.replayScanned, s.marked, s.idx.live)
	}
	replayed := s.idx
	if err := s.load(); err != nil {
		t.Fatal(err)
	}
	sameIndex(t, s.idx, replayed)
	s.idx = replayed
	res, err := s.Search(ctx, hindsight.Query{Text: "changed within the bulk", K: 10, NoHit: true})
	if err != nil || len(res) != 10 {
		t.Fatalf("search for the changed ones: %d found, %v", len(res), err)
	}
	if !s.checkpointDue(s.idx.live) {
		t.Fatal("no checkpoint due after a scan")
	}
	if err := s.checkpoint(false); err != nil {
		t.Fatal(err)
	}
	if bulkMarked(t, s) || s.marked {
		t.Fatal("the marker is kept after a checkpoint")
	}
	relesson(t, s, list[20], "after the marker")
	crash(s)

	s = reopen(t, dir)
	defer s.Close()
	if !s.fromSnapshot || s.replayScanned || s.dirty.Load() != 1 {
		t.Fatalf("from snapshot %v, tables scanned %v, %d replayed; want 1 from change keys", s.fromSnapshot, s.replayScanned, s.dirty.Load())
	}
}

// bulkMarked reports whether s's database holds the bulk marker.
func bulkMarked(t *testing.T, s *Store) bool {
	t.Helper()
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(bulkKey))
		return err
	})
	if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
		t.Fatal(err)
	}
	return err == nil
}
