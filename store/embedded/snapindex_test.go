package embedded

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// encodeSmall returns the snapshot encoding (without the checksum) of an
// index of n synthetic experiences.
func encodeSmall(t testing.TB, n int, gen []byte) []byte {
	exps, _ := benchset.Synthetic(n, 0)
	emb := embedder.NewLocal(64)
	id := "hindsight-hash-v1/64"
	x := newIndex(emb.Dim())
	for i := range exps {
		e := exps[i]
		vs, err := emb.Embed(context.Background(), []string{e.Situation})
		if err != nil {
			t.Fatal(err)
		}
		e.Vector, e.Embedder = vs[0], id
		x.add(&e, id, nil)
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	e := &enc{w: w}
	encodeIndex(e, x.compact(true), gen, 12345, id)
	if e.err != nil || w.Flush() != nil {
		t.Fatal(e.err)
	}
	return buf.Bytes()
}

func decodeBytes(b, gen []byte) (*index, error) {
	d := &dec{r: bufio.NewReader(bytes.NewReader(b)), limit: int64(len(b))}
	x, covers, err := decodeIndex(d, gen, "hindsight-hash-v1/64", 64)
	if err == nil && covers != 12345 {
		return nil, fmt.Errorf("covers %d, want 12345", covers)
	}
	return x, err
}

// FuzzDecodeIndex feeds the snapshot decoder damaged snapshots (the
// checksum is skipped, so every byte reaches it): it must return an
// index or an error, never panic or allocate beyond the input's size.
func FuzzDecodeIndex(f *testing.F) {
	gen := bytes.Repeat([]byte{7}, 16)
	good := encodeSmall(f, 20, gen)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := decodeBytes(b, gen)
		if err == nil && len(x.docs) != x.live {
			t.Fatalf("decoded %d slots, %d live", len(x.docs), x.live)
		}
	})
}

// TestDecodeIndex checks that a snapshot decodes to the index it was
// written from, and that every truncation of it is refused.
func TestDecodeIndex(t *testing.T) {
	gen := bytes.Repeat([]byte{7}, 16)
	good := encodeSmall(t, 50, gen)
	x, err := decodeBytes(good, gen)
	if err != nil {
		t.Fatal(err)
	}
	if x.live != 50 || len(x.byKey) != 50 || len(x.postings) == 0 {
		t.Fatalf("decoded %d live, %d keys, %d terms", x.live, len(x.byKey), len(x.postings))
	}
	if _, err := decodeBytes(good, bytes.Repeat([]byte{8}, 16)); err == nil {
		t.Fatal("a snapshot of another generation decoded")
	}
	for n := 0; n < len(good); n += 1 + n/16 {
		if _, err := decodeBytes(good[:n], gen); err == nil {
			t.Fatalf("a snapshot cut to %d of %d bytes decoded", n, len(good))
		}
	}
}
