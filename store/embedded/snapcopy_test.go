package embedded

import (
	"bufio"
	"bytes"
	"context"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// TestSnapshotWithoutVectorCopy: a copy that reads its vectors from the
// index (compactTo without vecs, what a checkpoint writes) encodes to
// the same bytes as a copy with vectors, dead slots, a slot without a
// vector and a partial last chunk included.
func TestSnapshotWithoutVectorCopy(t *testing.T) {
	exps, _ := benchset.Synthetic(chunkSlots+300, 0)
	emb := embedder.NewLocal(64)
	id := "hindsight-hash-v1/64"
	x := newIndex(emb.Dim())
	for i := range exps {
		e := exps[i]
		if i%97 != 0 { // every 97th has no vector
			vs, err := emb.Embed(context.Background(), []string{e.Situation})
			if err != nil {
				t.Fatal(err)
			}
			e.Vector, e.Embedder = vs[0], id
		}
		x.add(&e, id, nil)
		if i%50 == 0 { // indexed again: its first slot dies
			x.add(&e, id, nil)
		}
	}
	encode := func(cx *index) []byte {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		e := &enc{w: w}
		encodeIndex(e, cx, []byte("0123456789abcdef"), 7, id)
		if e.err != nil || w.Flush() != nil {
			t.Fatal(e.err)
		}
		return buf.Bytes()
	}
	want, got := encode(x.compact(true)), encode(x.compactTo(true, false))
	if !bytes.Equal(want, got) {
		t.Fatalf("snapshot without a vector copy differs: %d bytes, want %d", len(got), len(want))
	}
}

// TestCheckpointWhileChangingVectors: checkpoints written while Puts
// change vectors in place (same text, a new vector) leave a snapshot
// that, after a crash and replay, is the index a rebuild makes.
func TestCheckpointWhileChangingVectors(t *testing.T) {
	dir := t.TempDir()
	opt := benchOptions()
	opt.CheckpointInterval = -1
	s, err := Open(dir, embedder.NewLocal(0), opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	exps, _ := benchset.Synthetic(chunkSlots+200, 0)
	ptrs := make([]*hindsight.Experience, len(exps))
	for i := range exps {
		exps[i].Version = 0
		ptrs[i] = &exps[i]
	}
	if _, err := s.PutBatch(ctx, ptrs); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	checkpoints := 0
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := s.checkpoint(true); err != nil {
				done <- err
				return
			}
			checkpoints++
		}
	}()
	for i := 0; i < len(exps); i += 3 {
		got, err := s.Get(ctx, exps[i].Namespace, exps[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := s.emb.Embed(ctx, []string{"another text " + exps[(i+1)%len(exps)].Situation})
		if err != nil {
			t.Fatal(err)
		}
		got.Vector, got.Embedder = vs[0], s.embID
		if err := s.Put(ctx, got); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if checkpoints == 0 {
		t.Fatal("no checkpoint was taken")
	}
	crashAndReplay(t, s, dir)
}
