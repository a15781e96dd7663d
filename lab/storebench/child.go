//go:build linux

package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/benchset"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// builtMarker is the file build leaves in a finished store directory:
// the benchmark's queries, as JSON, so that the measuring child need not
// generate the experiences again to get them.
const builtMarker = "storebench-queries.json"

// result is what a measure child reports.
type result struct {
	N                  int
	RSSOpenMB, StartMS float64
	P50MS, P99MS       float64
	FP50MS, FP99MS     float64 // with the server, tool and error-code filters
	// Process CPU time per query: on shared cores, wall-clock figures
	// include waiting for a core.
	CPU50MS, CPU99MS, FCPU50MS, FCPU99MS float64
	RSSQueriesMB                         float64
	// The part of each resident set that is file pages (the mapped
	// snapshot and Badger's tables): clean, so the kernel can drop them.
	FileOpenMB, FileQueriesMB float64
	DiskBytes                 int64
}

func options() embedded.Options {
	return embedded.Options{Now: func() time.Time { return benchset.RefTime }}
}

// build writes n synthetic experiences into a new store in dir.
func build(dir string, n int) error {
	os.RemoveAll(dir)
	exps, qs := benchset.Synthetic(n, 500)
	s, err := embedded.Open(dir, embedder.NewLocal(0), options())
	if err != nil {
		return err
	}
	ctx := context.Background()
	for i := range exps {
		e := exps[i]
		e.Version = 0
		if err := s.Put(ctx, &e); err != nil {
			s.Close()
			return err
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	b, err := json.Marshal(qs)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, builtMarker), b, 0o644)
}

// measure opens the store in dir, answers the first query, runs the
// queries warmup times unmeasured (faulting in the mapped vectors, as a
// daemon's first queries do), then runs them unfiltered and filtered, and
// writes a result as JSON to out.
func measure(dir string, n, queries, warmup int, cpuProf, memProf string, out io.Writer) error {
	var qs []benchset.Query
	b, err := os.ReadFile(filepath.Join(dir, builtMarker))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &qs); err != nil {
		return err
	}
	qs = qs[:min(queries, len(qs))]
	if cpuProf != "" {
		f, err := os.Create(cpuProf)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	start := time.Now()
	s, err := embedded.Open(dir, embedder.NewLocal(0), options())
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Search(ctx, hindsight.Query{Text: qs[0].Text, K: 3, NoHit: true}); err != nil {
		return err
	}
	r := result{N: n, StartMS: ms(time.Since(start)), RSSOpenMB: procStatusMB("VmRSS:"), FileOpenMB: procStatusMB("RssFile:")}
	if memProf != "" {
		runtime.GC()
		f, err := os.Create(memProf)
		if err != nil {
			return err
		}
		pprof.WriteHeapProfile(f)
		f.Close()
	}
	for range warmup {
		for _, bq := range qs {
			if _, err := s.Search(ctx, hindsight.Query{Text: bq.Text, K: 3, NoHit: true}); err != nil {
				return err
			}
		}
	}
	for _, filtered := range []bool{false, true} {
		var lat, cpu []time.Duration
		for _, bq := range qs {
			q := hindsight.Query{Text: bq.Text, K: 3, NoHit: true}
			if filtered {
				q.Server, q.Tool, q.ErrorCode = bq.Server, bq.Tool, bq.ErrorCode
			}
			t, c := time.Now(), processCPU()
			if _, err := s.Search(ctx, q); err != nil {
				return err
			}
			lat = append(lat, time.Since(t))
			cpu = append(cpu, processCPU()-c)
		}
		p50, p99 := percentiles(lat)
		c50, c99 := percentiles(cpu)
		if filtered {
			r.FP50MS, r.FP99MS, r.FCPU50MS, r.FCPU99MS = p50, p99, c50, c99
		} else {
			r.P50MS, r.P99MS, r.CPU50MS, r.CPU99MS = p50, p99, c50, c99
		}
	}
	r.RSSQueriesMB, r.FileQueriesMB = procStatusMB("VmRSS:"), procStatusMB("RssFile:")
	return json.NewEncoder(out).Encode(r)
}

// processCPU returns the CPU time (user and system) this process used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentiles(lat []time.Duration) (p50, p99 float64) {
	slices.Sort(lat)
	at := func(p float64) float64 { return ms(lat[min(int(p*float64(len(lat))), len(lat)-1)]) }
	return at(0.50), at(0.99)
}

// procStatusMB reads a kB field of /proc/self/status in MB.
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
