package bpe

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

// TestTableHeap checks that each loaded encoder holds under a quarter of
// the heap tiktoken-go's does, measured in the same process.
func TestTableHeap(t *testing.T) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	for _, name := range names {
		ourHeap, ours := heapAfter(func() any { e, _ := Load(name); return e })
		refHeap, ref := heapAfter(func() any { e, _ := tiktoken.GetEncoding(name); return e })
		t.Logf("live heap: %s %.1f MB, tiktoken-go %.1f MB", name, float64(ourHeap)/1e6, float64(refHeap)/1e6)
		if ourHeap*4 > refHeap {
			t.Errorf("%s holds %d bytes, tiktoken-go %d: not under a quarter", name, ourHeap, refHeap)
		}
		runtime.KeepAlive(ours)
		runtime.KeepAlive(ref)
	}
}

// benchText is a lesson-sized text of words, code and unicode.
var benchText = strings.Repeat("When list_files fails with EACCES on /var/run, retry with sudo=false; 中文 🙂 x := f(1234)\n", 4)

// BenchmarkCount compares counting speed with tiktoken-go.
func BenchmarkCount(b *testing.B) {
	for _, name := range names {
		e, r := encoders(b, name)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				e.Count(benchText)
			}
		})
		b.Run(name+"/tiktoken-go", func(b *testing.B) {
			for b.Loop() {
				_ = len(r.EncodeOrdinary(benchText))
			}
		})
	}
}

// BenchmarkGC measures a full collection with each tokenizer live (the
// collector's cost of the table), in the same run.
func BenchmarkGC(b *testing.B) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			e, _ := Load(name)
			for b.Loop() {
				runtime.GC()
			}
			runtime.KeepAlive(e)
		})
		b.Run(name+"/tiktoken-go", func(b *testing.B) {
			e, _ := tiktoken.GetEncoding(name)
			for b.Loop() {
				runtime.GC()
			}
			runtime.KeepAlive(e)
		})
	}
}

// BenchmarkLoad compares building each tokenizer.
func BenchmarkLoad(b *testing.B) {
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Load(name); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/tiktoken-go", func(b *testing.B) {
			for b.Loop() {
				if _, err := tiktoken.NewCoreBPE(mustRanks(b, name), nil, encodings[name].pattern); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func mustRanks(b *testing.B, name string) map[string]int {
	m, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(name + ".tiktoken")
	if err != nil {
		b.Fatal(err)
	}
	return m
}
