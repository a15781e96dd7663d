//go:build linux

// Command teamload runs a team's daemons against a shared 3-node Weaviate
// cluster (replication factor 3) and reports how the store holds up:
// searches per second, query_hindsight latency at k = 1 and k = 3, round
// trips per search, delta objects per experience after the run, objects
// and memory per node, and what surfaced or was lost while a node was
// killed and restarted mid-run.
//
// It starts the cluster (the weaviate-server binary, as the cluster tests
// do), bulk-loads -lessons generated lessons over -namespaces namespaces,
// starts -daemons simulated daemons (see fleet.go) spread over the nodes,
// and runs a mix of counted searches, reflections (some of one lesson by
// several daemons at the same moment), edits and pins for -duration,
// killing one node (-kill) at -kill-at for -down. Afterwards it waits for
// the daemons' queued writes, stops them (their hits flushed), and reads
// back through a store of its own what they were told was done.
//
//	go run ./lab/bench/cmd/teamload -daemons 10 -lessons 20000 -duration 3m
//	go run ./lab/bench/cmd/teamload -daemons 50 -lessons 100000 -duration 10m -kill leader
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/bench"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
	"github.com/hindsight-proxy/hindsight/store/embedder"
	"github.com/hindsight-proxy/hindsight/store/weaviate"
)

func main() { bench.Main("teamload", run) }

// options are the command's flags.
type options struct {
	daemons, lessons, spaces int
	duration, think          time.Duration
	kill                     string
	killAt, down             time.Duration
	sweep                    time.Duration
	sameEvery                time.Duration
	sameGroup                int
	mix                      mix
	dir                      string
	keep                     bool
	failover                 bool
	memlimit                 string
	seed                     uint64
}

func parse(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("teamload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	fs.IntVar(&o.daemons, "daemons", 10, "simulated daemons (each its own writer), spread over the nodes")
	fs.IntVar(&o.lessons, "lessons", 20000, "lessons bulk-loaded before the run")
	fs.IntVar(&o.spaces, "namespaces", 8, "namespaces (teams) the lessons are spread over")
	fs.DurationVar(&o.duration, "duration", 3*time.Minute, "how long the mix runs")
	fs.DurationVar(&o.think, "think", time.Second, "mean pause of each daemon between operations")
	fs.StringVar(&o.kill, "kill", killWrites, "node killed mid-run: writes (weaviate-1, which daemons 0, 3, 6 … write through), leader (the metadata Raft leader) or none")
	fs.DurationVar(&o.killAt, "kill-at", 0, "when the node is killed (default: a third into the run)")
	fs.DurationVar(&o.down, "down", 30*time.Second, "how long the node stays down")
	fs.DurationVar(&o.sameEvery, "same-every", 20*time.Second, "how often several daemons learn one lesson at the same moment")
	fs.IntVar(&o.sameGroup, "same-group", 3, "daemons that learn it")
	fs.DurationVar(&o.sweep, "sweep", time.Minute, "interval of each daemon's dedupe sweep (reflect.Sweeper); 0: none, and none after the run")
	mixFlag := fs.String("mix", "40,40,12,6,2", "percent of searches at k=1, at k=3, reflections, edits, pins")
	fs.StringVar(&o.dir, "dir", "", "working directory (default: a new temporary one, removed at the end)")
	fs.BoolVar(&o.keep, "keep", false, "keep the working directory")
	fs.BoolVar(&o.failover, "failover", true, "give each daemon the other nodes as its failover (weaviate.Config.Failover)")
	fs.StringVar(&o.memlimit, "node-memlimit", "2GiB", "GOMEMLIMIT of each Weaviate node")
	seed := fs.Int64("seed", 1, "seed of the generated lessons and the mix")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.seed = uint64(*seed)
	var w []int
	for f := range strings.SplitSeq(*mixFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("parse -mix: %q is not a percentage", f)
		}
		w = append(w, n)
	}
	if len(w) != 5 || w[0]+w[1]+w[2]+w[3]+w[4] == 0 {
		return nil, errors.New("parse -mix: want five percentages, not all zero")
	}
	o.mix = mix{w[0], w[1], w[2], w[3], w[4]}
	switch {
	case o.daemons < 1 || o.lessons < 1 || o.spaces < 1 || o.duration <= 0 || o.think <= 0:
		return nil, errors.New("-daemons, -lessons, -namespaces, -duration and -think must be positive")
	case o.kill != killWrites && o.kill != killLeader && o.kill != killNone:
		return nil, fmt.Errorf("-kill %q: want writes, leader or none", o.kill)
	}
	if o.killAt == 0 {
		o.killAt = o.duration / 3
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "teamload-"); err != nil {
			return fmt.Errorf("make working directory: %w", err)
		}
		if !o.keep {
			defer os.RemoveAll(dir)
		}
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
	}
	t0 := time.Now()
	c, err := weaviatetest.LaunchCluster(3, filepath.Join(dir, "cluster"), []string{"GOMEMLIMIT=" + o.memlimit})
	if err != nil {
		return err
	}
	defer c.Stop()
	logf("3-node cluster ready in %v", time.Since(t0).Round(time.Millisecond))
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, n.URL)
	}
	emb := embedder.NewLocal(0)
	hc, rt := newHTTPClient()
	cfg := fleetConfig{dir: dir, urls: urls, failover: o.failover, class: "TeamLoad", emb: emb, http: hc,
		trips: &searchTrips{requests: map[int]int64{}, searches: map[int]int64{}}}
	start := time.Now()
	loadRate, err := bulkLoad(ctx, cfg, o, start, logf)
	if err != nil {
		return err
	}
	var members []*member
	defer func() {
		for _, m := range members {
			m.stop()
		}
	}()
	for i := range o.daemons {
		m, err := startMember(ctx, cfg, i)
		if err != nil {
			return err
		}
		members = append(members, m)
	}
	logf("%d daemons started", len(members))
	sweeps := startSweeps(ctx, members, o, cfg.emb)
	l := &load{members: members, corpus: o.lessons, spaces: o.spaces, seed: o.seed, mix: o.mix, think: o.think,
		rec: newRecord(), emb: emb, start: start}
	rep := &report{opts: o, loadRate: loadRate, dir: dir}
	rtBefore := rt.total.Load()
	runStart := time.Now()
	if err := l.drive(ctx, c, o, rep, logf); err != nil {
		return err
	}
	rep.elapsed = time.Since(runStart)
	rep.requests = rt.total.Load() - rtBefore
	logf("load done; waiting for queued writes")
	if rep.deferredLeft, err = settle(ctx, l, logf); err != nil {
		return err
	}
	if rep.swept, err = sweeps.finish(ctx); err != nil {
		return err
	}
	for _, m := range members {
		rep.compactions += m.store.Stats().Compactions
		rep.failovers += m.store.Stats().Failovers
		rep.deduped += m.metrics.Merged()["deduplicated"]
		rep.hitsLostCounted += counterValue(m.srv.Registry, "hindsight_daemon_hits_lost_total")
	}
	for _, m := range members {
		if err := m.stop(); err != nil {
			logf("stop daemon %d: %v", m.id, err)
		}
	}
	members = nil
	rep.trips = cfg.trips
	rep.rec = l.rec
	return rep.finish(ctx, c, cfg, stdout, logf)
}

// bulkLoad imports the generated lessons, 1000 at a time (sorted by
// namespace: Import looks up the stored ones per namespace) from one
// writer per node, and returns the rate (lessons per second).
func bulkLoad(ctx context.Context, cfg fleetConfig, o *options, now time.Time, logf func(string, ...any)) (float64, error) {
	var stores []*weaviate.Store
	for _, u := range cfg.urls {
		st, err := weaviate.Open(ctx, weaviate.Config{URL: u, Class: cfg.class, ReplicationFactor: 3, Logger: quiet}, cfg.emb)
		if err != nil {
			return 0, fmt.Errorf("bulk load: %w", err)
		}
		stores = append(stores, st)
	}
	const batch = 1000
	t0 := time.Now()
	next := make(chan int)
	errc := make(chan error, len(stores))
	var wg sync.WaitGroup
	for _, st := range stores {
		wg.Go(func() {
			for from := range next {
				var exps []*hindsight.Experience
				for i := from; i < min(from+batch, o.lessons); i++ {
					exps = append(exps, lesson(i, o.spaces, o.seed, now))
				}
				slices.SortStableFunc(exps, func(a, b *hindsight.Experience) int { return strings.Compare(a.Namespace, b.Namespace) })
				if err := st.Import(ctx, exps); err != nil {
					errc <- fmt.Errorf("bulk load: %w", err)
					return
				}
			}
		})
	}
	var failed error
	for from := 0; from < o.lessons && failed == nil; from += batch {
		select {
		case next <- from:
		case failed = <-errc:
		}
		if from > 0 && from%(20*batch) == 0 {
			logf("bulk load: %d lessons", from)
		}
	}
	close(next)
	wg.Wait()
	if failed == nil && len(errc) > 0 {
		failed = <-errc
	}
	if failed != nil {
		return 0, failed
	}
	d := time.Since(t0)
	rate := float64(o.lessons) / d.Seconds()
	logf("bulk load: %d lessons in %v (%.0f/s)", o.lessons, d.Round(time.Millisecond), rate)
	return rate, nil
}

// drive runs the mix on every daemon for o.duration, the same-moment
// lessons every o.sameEvery, and the node kill.
func (l *load) drive(parent context.Context, c *weaviatetest.Cluster, o *options, rep *report, logf func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(parent, o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range l.members {
		wg.Go(func() { l.run(ctx, m) })
	}
	wg.Go(func() {
		r := rand.New(rand.NewPCG(o.seed, 0))
		t := time.NewTicker(o.sameEvery)
		defer t.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				l.sameMoment(ctx, r, o.sameGroup, n)
			}
		}
	})
	var killErr error
	if o.kill != killNone {
		wg.Go(func() { killErr = l.killNode(ctx, c, o, rep, logf) })
	}
	wg.Wait()
	if killErr != nil {
		return killErr
	}
	return parent.Err()
}

// killNode kills the node of o.kill at o.killAt (SIGKILL), and starts it
// again o.down later.
func (l *load) killNode(ctx context.Context, c *weaviatetest.Cluster, o *options, rep *report, logf func(string, ...any)) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(o.killAt):
	}
	v, err := victim(ctx, c, o.kill)
	if err != nil {
		return err
	}
	rep.victim = fmt.Sprintf("weaviate-%d (%s)", v+1, o.kill)
	logf("killing %s", rep.victim)
	c.Nodes[v].Kill()
	l.rec.setPhase(phaseDown)
	select {
	case <-ctx.Done():
	case <-time.After(o.down):
	}
	t0 := time.Now()
	if err := c.Nodes[v].Resume(); err != nil {
		return err
	}
	rep.restart = time.Since(t0)
	l.rec.setPhase(phaseAfter)
	logf("%s back after %v", rep.victim, rep.restart.Round(time.Millisecond))
	return nil
}

// settle waits (at most two minutes) until no daemon has writes queued
// and every deferred reflection is stored; it returns the reflections
// still deferred then.
func settle(ctx context.Context, l *load, logf func(string, ...any)) (int, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		left := l.retryPending(sctx)
		queued := 0
		for _, m := range l.members {
			queued += m.ops.Depth()
		}
		if left == 0 && queued == 0 {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return left, ctx.Err()
		case <-sctx.Done():
			logf("after 2 min: %d reflections deferred, %d writes queued; counted below", left, queued)
			return left, nil
		case <-time.After(time.Second):
		}
	}
}
