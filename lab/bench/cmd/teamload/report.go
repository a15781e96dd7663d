//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
	"github.com/prometheus/client_golang/prometheus"
)

// report gathers the run's figures.
type report struct {
	opts            *options
	dir             string
	loadRate        float64
	elapsed         time.Duration
	requests        int64 // requests to Weaviate during the run
	victim          string
	restart         time.Duration
	compactions     int64
	failovers       int64 // the daemons' stores' moves to another node
	deduped         int
	swept           int // copies merged by the sweeps (also in deduped)
	hitsLostCounted float64
	deferredLeft    int // reflections still deferred when the run gave up waiting
	trips           *searchTrips
	rec             *record
}

// counterValue returns the value of the counter name in reg (0 if none).
func counterValue(reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		return sum
	}
	return 0
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// finish reads the cluster back and prints the report.
func (rep *report) finish(ctx context.Context, c *weaviatetest.Cluster, cfg fleetConfig, w io.Writer, logf func(string, ...any)) error {
	o, rec := rep.opts, rep.rec
	st, err := weaviate.Open(ctx, weaviate.Config{URL: cfg.urls[1], Class: cfg.class, ReplicationFactor: 3, Logger: quiet}, cfg.emb)
	if err != nil {
		return fmt.Errorf("open the checking store: %w", err)
	}
	t0 := time.Now()
	ls, err := check(ctx, st, rec)
	if err != nil {
		return err
	}
	logf("read back in %v", time.Since(t0).Round(time.Millisecond))
	counts, err := deltaCounts(ctx, cfg.urls[1], cfg.class, o.spaces)
	if err != nil {
		return err
	}
	nodes, err := nodeStats(ctx, c, cfg.class, o.spaces)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "## teamload: %d daemons, %d lessons in %d namespaces, %v (%s)\n\n", o.daemons, o.lessons, o.spaces,
		o.duration, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "machine: %d cores (%s/%s); mix %d/%d/%d/%d/%d (search k=1/k=3/reflection/edit/pin), think %v per daemon, same-moment lesson every %v by %d daemons\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, o.mix.search1, o.mix.search3, o.mix.reflect, o.mix.edit, o.mix.pin,
		o.think, o.sameEvery, o.sameGroup)
	fmt.Fprintf(w, "| figure | value |\n|---|--:|\n")
	row := func(k, v string, a ...any) { fmt.Fprintf(w, "| %s | "+v+" |\n", append([]any{k}, a...)...) }
	row("bulk load", "%.0f lessons/s", rep.loadRate)
	all := map[string][]time.Duration{}
	for _, ops := range rec.lat {
		for op, lat := range ops {
			all[op] = append(all[op], lat...)
		}
	}
	searches := len(all[opSearch1]) + len(all[opSearch3])
	row("searches answered", "%d (%.1f/s)", searches, float64(searches)/rep.elapsed.Seconds())
	for _, op := range []string{opSearch1, opSearch3, opReflect, opSame, opEdit, opPin} {
		lat := slices.Clone(all[op])
		slices.Sort(lat)
		if len(lat) == 0 {
			continue
		}
		steady := slices.Clone(rec.lat[phaseBefore][op])
		slices.Sort(steady)
		row(op+" p50 / p99: whole run; before the kill", "%s / %s (%d); %s / %s (%d)", ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), len(lat),
			ms(percentile(steady, 0.5)), ms(percentile(steady, 0.99)), len(steady))
	}
	row("round trips per search, k=1 / k=3", "%.2f / %.2f", rep.trips.perSearch(1), rep.trips.perSearch(3))
	row("requests to Weaviate during the run", "%d (%.0f/s)", rep.requests, float64(rep.requests)/rep.elapsed.Seconds())
	if len(counts) > 0 {
		row("delta objects per experience after the run: max / p99 / p50", "%d / %d / %d (%d experiences have any)",
			counts[len(counts)-1], counts[min(len(counts)-1, len(counts)*99/100)], counts[len(counts)/2], len(counts))
	} else {
		row("delta objects per experience after the run", "none")
	}
	row("compactions (checkpoints written)", "%d", rep.compactions)
	row("same-moment lessons: copies merged / most live copies left", "%d merged / %d (of %d lessons)", rep.deduped, ls.sameCopiesMax, ls.same)
	row("copies merged by the dedupe sweeps (of those merged)", "%d", rep.swept)
	for p, n := range ls.sameLeft {
		row("same-moment lessons left with copies, learnt "+p, "%d", n)
	}
	for _, n := range nodes {
		row(n.name+": objects (aggregated through it; in its node status), data on disk, RSS (peak)", "%d (%d), %d MB, %d MB (%d MB)",
			n.held, n.objects, n.disk>>20, n.rss>>20, n.peak>>20)
	}
	if rep.victim != "" {
		row("node killed", "%s for %v at %v; ready again %v after its start", rep.victim, o.down, o.killAt, rep.restart.Round(time.Millisecond))
		row("store failovers to another node (-failover)", "%d (%v)", rep.failovers, o.failover)
	}
	row("hits: returned / stored / lost (daemons counted lost)", "%d / %d / %d (%.0f)", ls.hitsWanted, ls.hitsStored, ls.hitsLost, rep.hitsLostCounted)
	row("edits and pins acknowledged / lost", "%d / %d", ls.editsAcked, ls.editsLost)
	row("lessons reflections stored / lost / still deferred at the end", "%d / %d / %d", ls.learnt, ls.learntLost, rep.deferredLeft)
	if ls.unreadable > 0 {
		row("experiences the check could not read", "%d", ls.unreadable)
	}
	fmt.Fprintf(w, "\nOutcomes by phase (op/outcome: count):\n\n")
	for _, p := range []string{phaseBefore, phaseDown, phaseAfter} {
		oc := rec.outcomes[p]
		if len(oc) == 0 {
			continue
		}
		var keys []string
		for k := range oc {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, oc[k]))
		}
		fmt.Fprintf(w, "- %s: %s\n", p, strings.Join(parts, ", "))
	}
	if len(rec.errs) > 0 {
		fmt.Fprintf(w, "\nErrors surfaced (first %d):\n\n", len(rec.errs))
		for _, e := range rec.errs {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
	return nil
}
