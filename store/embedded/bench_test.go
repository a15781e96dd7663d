package embedded

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// loaded caches one store per size across benchmarks of a run.
var loaded = map[int]*benchStore{}

type benchStore struct {
	s       *Store
	qs      []benchset.Query
	dir     string
	ingest  time.Duration
	heapMB  float64
	rssMB   float64
	reopen  time.Duration
	heapAll float64
}

func loadStore(b *testing.B, n int) *benchStore {
	if bs, ok := loaded[n]; ok {
		return bs
	}
	b.Helper()
	exps, qs := benchset.Synthetic(n, 500)
	dir, err := os.MkdirTemp("", "hindsight-bench-")
	if err != nil {
		b.Fatal(err)
	}
	now := func() time.Time { return benchset.RefTime }
	s, err := Open(dir, embedder.NewLocal(0), Options{Now: now})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	putAll(b, s, exps)
	ingest := time.Since(start)
	exps = nil
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	// Measure a fresh daemon: reopen rebuilds the indexes from Badger.
	runtime.GC()
	start = time.Now()
	s, err = Open(dir, embedder.NewLocal(0), Options{Now: now})
	if err != nil {
		b.Fatal(err)
	}
	reopen := time.Since(start)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	bs := &benchStore{s: s, qs: qs, dir: dir, ingest: ingest, reopen: reopen,
		heapMB: float64(ms.HeapAlloc) / (1 << 20), rssMB: rssMB()}
	loaded[n] = bs
	return bs
}

// rssMB reads the resident set size of this process (Linux).
func rssMB() float64 { return procStatusMB("VmRSS:") }

// procStatusMB reads a kB field of /proc/self/status in MB (Linux; 0
// elsewhere).
func procStatusMB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, bs := range loaded {
		bs.s.Close()
		os.RemoveAll(bs.dir)
	}
	os.Exit(code)
}

// BenchmarkSearch measures query latency on one namespace holding n
// experiences: hybrid search without filters (the worst case: every
// experience is a candidate) and with the tool and error-code filters the
// sidecar sends. p50 and p99 are reported in microseconds.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, filtered := range []bool{false, true} {
			name := fmt.Sprintf("n=%d/filters=%v", n, filtered)
			b.Run(name, func(b *testing.B) {
				bs := loadStore(b, n)
				ctx := context.Background()
				var lat, cpu []time.Duration
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					bq := bs.qs[i%len(bs.qs)]
					i++
					q := hindsight.Query{Text: bq.Text, K: 3, NoHit: true}
					if filtered {
						q.Tool, q.ErrorCode = bq.Tool, bq.ErrorCode
					}
					start, cpu0 := time.Now(), testkit.ProcessCPU()
					if _, err := bs.s.Search(ctx, q); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
					cpu = append(cpu, testkit.ProcessCPU()-cpu0)
				}
				reportLatency(b, lat, "")
				reportLatency(b, cpu, "cpu-")
				b.ReportMetric(bs.heapMB, "heap-MB")
				b.ReportMetric(bs.rssMB, "rss-MB")
				b.ReportMetric(float64(n)/bs.ingest.Seconds(), "ingest-exp/s")
				b.ReportMetric(bs.reopen.Seconds(), "open-s")
			})
		}
	}
}

// reportLatency reports the median and 99th percentile of lat. On a
// shared machine the wall-clock figures include time spent waiting for a
// core; the "cpu-" ones (process CPU time per query) do not.
func reportLatency(b *testing.B, lat []time.Duration, prefix string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)].Microseconds())
	}
	b.ReportMetric(pct(0.50), prefix+"p50-µs")
	b.ReportMetric(pct(0.99), prefix+"p99-µs")
}

// BenchmarkPut measures ingest: one Put (embed, Badger transaction, index
// update) per experience into a store that grows as it runs.
func BenchmarkPut(b *testing.B) {
	exps, _ := benchset.Synthetic(20_000, 0)
	s, err := Open(b.TempDir(), embedder.NewLocal(0), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		e := exps[i%len(exps)]
		e.Version = 0
		e.ID = fmt.Sprintf("put-%d", i)
		i++
		if err := s.Put(ctx, &e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "exp/s")
}

// buildEnv names the directory in which TestBuildBenchStore, run as a
// child process by BenchmarkOpen, writes its store; buildCountEnv says
// how many experiences.
const (
	buildEnv      = "HINDSIGHT_BENCH_BUILD"
	buildCountEnv = "HINDSIGHT_BENCH_COUNT"
)

// TestBuildBenchStore is BenchmarkOpen's helper process: with buildEnv set
// it writes synthetic experiences there; otherwise it does nothing.
func TestBuildBenchStore(t *testing.T) {
	dir := os.Getenv(buildEnv)
	if dir == "" {
		return
	}
	n, err := strconv.Atoi(os.Getenv(buildCountEnv))
	if err != nil {
		n = 100_000
	}
	exps, _ := benchset.Synthetic(n, 0)
	s, err := Open(dir, embedder.NewLocal(0), Options{Now: func() time.Time { return benchset.RefTime }})
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, s, exps)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkOpen measures a daemon's start: Open (from the snapshot the
// previous Close wrote) until the first query is answered. A child
// process writes the store, so that this process's resident set (VmRSS)
// and its peak (VmHWM) hold only what Open loads and keeps. Run one size
// alone (-run XXX -bench 'BenchmarkOpen/n=100000' -benchtime 1x) for
// clean memory figures; go run ./lab/storebench measures
// every size in child processes of its own.
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBuildBenchStore$", "-test.count=1")
			cmd.Env = append(os.Environ(), buildEnv+"="+dir, buildCountEnv+"="+strconv.Itoa(n))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("build store: %v\n%s", err, out)
			}
			ctx := context.Background()
			first := true
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				s, err := Open(dir, embedder.NewLocal(0), Options{Now: func() time.Time { return benchset.RefTime }})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Search(ctx, hindsight.Query{Text: "read_file failed ENOENT", NoHit: true}); err != nil {
					b.Fatal(err)
				}
				open := time.Since(start)
				b.StopTimer()
				if first {
					first = false
					runtime.GC()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					b.ReportMetric(open.Seconds(), "open-s")
					b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
					b.ReportMetric(procStatusMB("VmRSS:"), "rss-MB")
					b.ReportMetric(procStatusMB("VmHWM:"), "hwm-MB")
				}
				if !s.fromSnapshot {
					b.Fatal("open rebuilt the index instead of loading the snapshot")
				}
				if err := s.Close(); err != nil { // writes the next snapshot
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkReplay measures a start after a crash: the store held n
// experiences and a snapshot of them, then wrote 200 new ones and
// counted hits on 1,000, and was killed; Open replays those writes over
// the snapshot. Its open-s compares with BenchmarkOpen's.
func BenchmarkReplay(b *testing.B) {
	for _, n := range []int{20_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBuildBenchStore$", "-test.count=1")
			cmd.Env = append(os.Environ(), buildEnv+"="+dir, buildCountEnv+"="+strconv.Itoa(n))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("build store: %v\n%s", err, out)
			}
			ctx := context.Background()
			opt := Options{Now: func() time.Time { return benchset.RefTime }, CheckpointInterval: -1}
			extra, _ := benchset.Synthetic(200, 0)
			round := 0
			for b.Loop() {
				round++
				b.StopTimer()
				s, err := Open(dir, embedder.NewLocal(0), opt)
				if err != nil {
					b.Fatal(err)
				}
				list, _ := s.List(ctx, hindsight.ListOptions{Limit: 1000})
				ids := make([]string, len(list))
				for i := range list {
					ids[i] = list[i].ID
				}
				batch := make([]*hindsight.Experience, len(extra))
				for i := range extra {
					e := extra[i]
					e.ID, e.Version, e.Vector = fmt.Sprintf("extra-%d-%d", round, i), 0, nil
					batch[i] = &e
				}
				if _, err := s.PutBatch(ctx, batch); err != nil {
					b.Fatal(err)
				}
				if err := s.RecordHits(ctx, "", ids, benchset.RefTime); err != nil {
					b.Fatal(err)
				}
				crash(s)
				b.StartTimer()
				start := time.Now()
				s, err = Open(dir, embedder.NewLocal(0), opt)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Search(ctx, hindsight.Query{Text: "read_file failed ENOENT", NoHit: true}); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds(), "open-s")
				b.ReportMetric(float64(s.dirty.Load()), "replayed")
				b.StopTimer()
				if !s.fromSnapshot {
					b.Fatal("open rebuilt the index instead of replaying over the snapshot")
				}
				crash(s)
				b.StartTimer()
			}
		})
	}
}
