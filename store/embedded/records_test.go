package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

func randomUnit(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	normalize(v)
	return v
}

// TestVecEncoding checks the stored form of vectors: 16-bit integers and
// a power-of-two scale in an odd number of bytes, close to the vector,
// the same bytes once stored again; float32 (the older form) read as it
// was written, and any other length read as no vector.
func TestVecEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	big := randomUnit(r, 64)
	for i := range big {
		big[i] *= 3e4
	}
	tiny := randomUnit(r, 64)
	for i := range tiny {
		tiny[i] *= 1e-20
	}
	for name, v := range map[string][]float32{
		"unit 512": randomUnit(r, 512),
		"unit 3":   {0.6, -0.8, 0},
		"zero":     make([]float32, 8),
		"large":    big,
		"tiny":     tiny,
		"one":      {-1},
		"empty":    {},
	} {
		t.Run(name, func(t *testing.T) {
			b := encodeVec(v)
			if len(b) != 5+2*len(v) || b[0] != vecQ16 {
				t.Fatalf("encoded in %d bytes, tag %#x; want %d, %#x", len(b), b[0], 5+2*len(v), vecQ16)
			}
			got := decodeVec(b, nil)
			if len(got) != len(v) {
				t.Fatalf("decoded %d dimensions; want %d", len(got), len(v))
			}
			peak := float32(0)
			for _, f := range v {
				peak = max(peak, abs32(f))
			}
			for i := range v {
				if d := abs32(got[i] - v[i]); d > peak/32768 {
					t.Fatalf("dimension %d: %g for %g (peak %g)", i, got[i], v[i], peak)
				}
			}
			if again := encodeVec(got); !bytes.Equal(again, b) {
				t.Fatalf("a stored vector encodes to other bytes")
			}
			if s := storedVec(v); len(v) > 0 && !slicesEqual(s, got) {
				t.Fatalf("storedVec = %v; want %v", s, got)
			}
		})
	}

	// The cosine of two unit vectors moves by less than 1e-4.
	for range 200 {
		a, b := randomUnit(r, 512), randomUnit(r, 512)
		a[0] += 0.5 // not orthogonal
		normalize(a)
		exact := dot(a, b)
		sa, sb := storedVec(a), storedVec(b)
		if d := math.Abs(float64(dot(sa, sb) - exact)); d > 1e-4 {
			t.Fatalf("cosine %g stored as %g", exact, dot(sa, sb))
		}
	}

	// A vector with a NaN or an infinity, or too small a largest
	// component for a float32 scale, stays float32.
	for _, v := range [][]float32{{1, float32(math.NaN())}, {float32(math.Inf(-1)), 0}, {1e-40, -1e-41}} {
		b := encodeVec(v)
		if len(b) != 8 {
			t.Fatalf("%v encoded in %d bytes; want float32's 8", v, len(b))
		}
		if got := decodeVec(b, nil); math.Float32bits(got[0]) != math.Float32bits(v[0]) ||
			math.Float32bits(got[1]) != math.Float32bits(v[1]) {
			t.Fatalf("%v decoded as %v", v, got)
		}
	}

	// The older float32 form decodes exactly, into dst when it has room.
	old := randomUnit(r, 16)
	dst := make([]float32, 0, 16)
	if got := decodeVec(encodeFloat32(old), dst); !slicesEqual(got, old) || &got[0] != &dst[:1][0] {
		t.Fatalf("float32 vector decoded as %v", got)
	}

	// Neither form: no vector.
	for _, b := range [][]byte{{1, 2}, {1, 2, 3, 4, 5, 6}, {0, 0, 0, 0, 0, 0, 0}, {vecQ16, 0, 0}} {
		if got := decodeVec(b, nil); got != nil {
			t.Errorf("% x decoded as %v; want nil", b, got)
		}
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// FuzzDecodeVec: any stored value decodes without a panic, to no vector
// or to one whose length its size gives, and a decoded 16-bit vector
// encodes to the same bytes.
func FuzzDecodeVec(f *testing.F) {
	f.Add(encodeVec([]float32{0.6, -0.8}))
	f.Add(encodeFloat32([]float32{0.6, -0.8}))
	f.Add([]byte{vecQ16})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v := decodeVec(b, nil)
		switch {
		case v == nil:
		case len(b)%2 == 1:
			if len(v) != (len(b)-5)/2 {
				t.Fatalf("%d bytes decoded to %d dimensions", len(b), len(v))
			}
			scale := math.Float32frombits(binary.LittleEndian.Uint32(b[1:]))
			if scale == 0 || math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
				return // not a scale encodeVec writes
			}
			if _, exp := math.Frexp(float64(scale)); math.Ldexp(1, exp-1) != float64(scale) {
				return // not a power of two
			}
		default:
			if len(v) != len(b)/4 {
				t.Fatalf("%d bytes decoded to %d dimensions", len(b), len(v))
			}
		}
	})
}

// TestFloat32VectorsStillRead opens a store whose vectors were written as
// float32 (by builds before the 16-bit form): rebuilt from the database,
// its index finds experiences by vector, and the exact re-ranking reads
// the old vectors.
func TestFloat32VectorsStillRead(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	emb := embedder.NewLocal(0)
	s, err := Open(dir, emb, Options{CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
		"kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"}
	for i, w := range words {
		e := &hindsight.Experience{ID: fmt.Sprintf("e%d", i), Tool: "read_file", ErrorCode: "ENOENT",
			Situation: fmt.Sprintf("reading the %s %s archive failed", w, w), Lesson: "list the directory first", Confidence: 0.8}
		if err := s.Put(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Rewrite every vector in the older form.
	err = s.db.Update(func(txn *badger.Txn) error {
		for i := range words {
			id := fmt.Sprintf("e%d", i)
			v, err := readVec(txn, hindsight.DefaultNamespace, id, nil)
			if err != nil || len(v) == 0 {
				return fmt.Errorf("read vector %s: %v (%d dimensions)", id, err, len(v))
			}
			if err := txn.Set(vecKey(hindsight.DefaultNamespace, id), encodeFloat32(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, snapshotName)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s, err = Open(dir, emb, Options{CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.fromSnapshot {
		t.Fatal("opened from a snapshot; want a rebuild from the database")
	}
	res, err := s.Search(ctx, hindsight.Query{Text: "the hotel hotel archive", K: 3, NoHit: true, Explain: true})
	if err != nil || len(res) == 0 {
		t.Fatalf("search: %v %v", res, err)
	}
	if res[0].ID != "e7" || res[0].Explain.VectorRank != 1 {
		t.Fatalf("first result %s, vector rank %d; want e7 first by vector", res[0].ID, res[0].Explain.VectorRank)
	}
}
