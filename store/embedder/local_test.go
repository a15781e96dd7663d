package embedder_test

import (
	"context"
	"math"
	"testing"

	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

func TestLocal(t *testing.T) {
	e := embedder.NewLocal(0)
	if e.Dim() != 512 || e.Name() != "hindsight-hash-v1" {
		t.Fatalf("Local = %s/%d", e.Name(), e.Dim())
	}
	texts := []string{
		"read_file failed with ENOENT: no such file",
		"read_file fails with ENOENT, no such file",        // near-paraphrase
		"git push rejected: permission denied (publickey)", // unrelated
		"读取文件失败：文件不存在",
		"读取文件时失败，文件不存在",
		"",
	}
	vs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs[:5] {
		var n float64
		for _, f := range v {
			n += float64(f) * float64(f)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Errorf("text %d: norm² %v, want 1", i, n)
		}
	}
	for _, f := range vs[5] {
		if f != 0 {
			t.Fatal("empty text: non-zero vector")
		}
	}
	para, unrel := store.Cosine(vs[0], vs[1]), store.Cosine(vs[0], vs[2])
	if para < 0.6 || unrel > 0.2 || para < 3*unrel {
		t.Errorf("paraphrase %.3f, unrelated %.3f", para, unrel)
	}
	if zh := store.Cosine(vs[3], vs[4]); zh < 0.6 {
		t.Errorf("Chinese paraphrase cosine %.3f", zh)
	}
	again, _ := e.Embed(context.Background(), texts[:1])
	if store.Cosine(again[0], vs[0]) != 1 {
		t.Error("not deterministic")
	}
}

// TestLocalDeterministic: the same text embeds to the same vector, bit for
// bit, every time (features are summed in a fixed order).
func TestLocalDeterministic(t *testing.T) {
	l := embedder.NewLocal(0)
	text := "read_file failed with ENOENT: no such file or directory; retry with an absolute path under /data, then read_file again"
	first, err := l.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		again, err := l.Embed(context.Background(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		for k := range first[0] {
			if math.Float32bits(first[0][k]) != math.Float32bits(again[0][k]) {
				t.Fatalf("dimension %d: %v then %v", k, first[0][k], again[0][k])
			}
		}
	}
}
