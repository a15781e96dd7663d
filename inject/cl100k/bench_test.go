package cl100k

import (
	"runtime"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// heapAfter returns the live heap, in bytes, that load adds.
func heapAfter(load func() any) (uint64, any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := load()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return after.HeapAlloc - before.HeapAlloc, v
}

// TestTableHeap checks that the loaded encoder holds under a quarter of the
// heap tiktoken-go's does, measured in the same process.
func TestTableHeap(t *testing.T) {
	ourHeap, ours := heapAfter(func() any { e, _ := Load(); return e })
	refHeap, ref := heapAfter(func() any {
		tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
		e, _ := tiktoken.GetEncoding("cl100k_base")
		return e
	})
	t.Logf("live heap: cl100k %.1f MB, tiktoken-go %.1f MB", float64(ourHeap)/1e6, float64(refHeap)/1e6)
	if ourHeap*4 > refHeap {
		t.Errorf("cl100k holds %d bytes, tiktoken-go %d: not under a quarter", ourHeap, refHeap)
	}
	runtime.KeepAlive(ours)
	runtime.KeepAlive(ref)
}

// benchText is a lesson-sized text of words, code and unicode.
var benchText = strings.Repeat("When list_files fails with EACCES on /var/run, retry with sudo=false; 中文 🙂 x := f(1234)\n", 4)

// BenchmarkCount compares counting speed with tiktoken-go.
func BenchmarkCount(b *testing.B) {
	e, r := encoders(b)
	b.Run("cl100k", func(b *testing.B) {
		for b.Loop() {
			e.Count(benchText)
		}
	})
	b.Run("tiktoken-go", func(b *testing.B) {
		for b.Loop() {
			_ = len(r.EncodeOrdinary(benchText))
		}
	})
}

// BenchmarkGC measures a full collection with each tokenizer live (the
// collector's cost of the table), in the same run.
func BenchmarkGC(b *testing.B) {
	b.Run("cl100k", func(b *testing.B) {
		e, _ := Load()
		for b.Loop() {
			runtime.GC()
		}
		runtime.KeepAlive(e)
	})
	b.Run("tiktoken-go", func(b *testing.B) {
		tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
		e, _ := tiktoken.GetEncoding("cl100k_base")
		for b.Loop() {
			runtime.GC()
		}
		runtime.KeepAlive(e)
	})
}

// BenchmarkLoad compares building each tokenizer.
func BenchmarkLoad(b *testing.B) {
	b.Run("cl100k", func(b *testing.B) {
		for b.Loop() {
			if _, err := Load(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tiktoken-go", func(b *testing.B) {
		tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
		for b.Loop() {
			if _, err := tiktoken.NewCoreBPE(mustRanks(b), nil, pattern); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func mustRanks(b *testing.B) map[string]int {
	m, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe("cl100k_base.tiktoken")
	if err != nil {
		b.Fatal(err)
	}
	return m
}
