//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/bench"
)

// config is one measurement: one build, a fresh home, one pack.
type config struct {
	name, exe, home string
	files           []string // the pack's files; the last is the small import before the SIGKILL
	queries         []string
	n               int
}

// row is what one measurement found. Memory is VmRSS in bytes.
type row struct {
	name             string
	n                int
	importTime       time.Duration
	importCPU        time.Duration // the daemon's CPU time over the import
	rssImported      int64         // after the import
	hwmImport        int64         // VmHWM: the peak over the import
	stopImported     time.Duration
	startClean       time.Duration // start to the first search answer
	rssClean         int64         // at the first answer
	p50, p99         time.Duration // counted searches after the clean start
	rssQueried       int64
	stopClean        time.Duration // graceful stop after the searches
	startKilled      time.Duration // after writes, searches and a SIGKILL
	rssKilled        int64
	p50K, p99K       time.Duration
	rssKilledQueried int64
	hwmKilled        int64 // VmHWM of the restarted daemon
	// RssFile (pages of mapped files: the index snapshot's vectors,
	// Badger's tables) in the five states VmRSS is read in, in the
	// order of the memory table.
	file [5]int64
}

// proc is a running `hindsight daemon`.
type proc struct {
	cmd    *exec.Cmd
	done   chan error
	c      *daemon.Client
	stderr bytes.Buffer
}

// start starts the daemon of cfg and returns once it answered a search,
// with how long that took.
func start(ctx context.Context, cfg config) (*proc, time.Duration, error) {
	p := &proc{done: make(chan error, 1)}
	p.cmd = exec.Command(cfg.exe, "daemon")
	p.cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+cfg.home)
	p.cmd.Stderr = &p.stderr
	t0 := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start daemon: %w", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	p.c = daemon.NewClient(hindsight.Home(cfg.home).Socket())
	for {
		_, err := p.c.Search(ctx, hindsight.Query{Text: cfg.queries[0], K: 5, NoHit: true})
		if err == nil {
			return p, time.Since(t0), nil
		}
		select {
		case err := <-p.done:
			return nil, 0, fmt.Errorf("daemon exited: %v\n%s", err, p.stderr.String())
		case <-ctx.Done():
			p.cmd.Process.Kill()
			return nil, 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// memory returns the daemon's VmRSS and VmHWM, and records its RssFile
// in *file.
func (p *proc) memory(file *int64) (rss, hwm int64) {
	rss, _ = bench.ProcStatus(p.cmd.Process.Pid, "VmRSS")
	hwm, _ = bench.ProcStatus(p.cmd.Process.Pid, "VmHWM")
	*file, _ = bench.ProcStatus(p.cmd.Process.Pid, "RssFile")
	return rss, hwm
}

// cpu returns the daemon's CPU time so far (utime + stime, every thread).
func (p *proc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	_, rest, _ := bytes.Cut(b, []byte(") ")) // the name may hold spaces
	f := bytes.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(string(f[11]), 10, 64)
	st, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond // USER_HZ is 100
}

// stop sends sig and returns how long the daemon took to exit.
func (p *proc) stop(sig syscall.Signal) (time.Duration, error) {
	t0 := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return 0, err
	}
	select {
	case <-p.done:
		return time.Since(t0), nil
	case <-time.After(5 * time.Minute):
		p.cmd.Process.Kill()
		return 0, fmt.Errorf("the daemon ignored %v for 5 minutes", sig)
	}
}

// importFiles runs `hindsight experiences import` for each file.
func importFiles(ctx context.Context, cfg config, files []string) error {
	for _, f := range files {
		cmd := exec.CommandContext(ctx, cfg.exe, "experiences", "import", f, "--json")
		cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+cfg.home)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("import %s: %w\n%s", f, err, out)
		}
	}
	return nil
}

// search runs the queries, hits counted, and returns p50 and p99.
func search(ctx context.Context, c *daemon.Client, qs []string) (time.Duration, time.Duration, error) {
	lat := make([]time.Duration, 0, len(qs))
	for _, q := range qs {
		t0 := time.Now()
		if _, err := c.Search(ctx, hindsight.Query{Text: q, K: 5}); err != nil {
			return 0, 0, fmt.Errorf("search: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}

// measure runs the whole sequence for cfg.
func measure(ctx context.Context, cfg config, log io.Writer) (row, error) {
	r := row{name: cfg.name, n: cfg.n}
	bulk, extra := cfg.files[:len(cfg.files)-1], cfg.files[len(cfg.files)-1:]
	p, _, err := start(ctx, cfg)
	if err != nil {
		return r, err
	}
	t0, c0 := time.Now(), p.cpu()
	if err := importFiles(ctx, cfg, bulk); err != nil {
		p.cmd.Process.Kill()
		return r, err
	}
	r.importTime, r.importCPU = time.Since(t0), p.cpu()-c0
	fmt.Fprintf(log, "  imported in %v (%.0f/s), daemon CPU %v\n", r.importTime.Round(time.Millisecond),
		float64(cfg.n)/r.importTime.Seconds(), r.importCPU.Round(10*time.Millisecond))
	r.rssImported, r.hwmImport = p.memory(&r.file[0])
	if r.stopImported, err = p.stop(syscall.SIGTERM); err != nil {
		return r, err
	}

	if p, r.startClean, err = start(ctx, cfg); err != nil {
		return r, err
	}
	r.rssClean, _ = p.memory(&r.file[1])
	if r.p50, r.p99, err = search(ctx, p.c, cfg.queries); err != nil {
		p.cmd.Process.Kill()
		return r, err
	}
	r.rssQueried, _ = p.memory(&r.file[2])
	if r.stopClean, err = p.stop(syscall.SIGTERM); err != nil {
		return r, err
	}
	fmt.Fprintf(log, "  clean start %v, stop %v\n", r.startClean.Round(time.Millisecond), r.stopClean.Round(time.Millisecond))

	// Writes, counted searches, then a crash.
	if p, _, err = start(ctx, cfg); err != nil {
		return r, err
	}
	if err := importFiles(ctx, cfg, extra); err == nil {
		_, _, err = search(ctx, p.c, cfg.queries[:min(100, len(cfg.queries))])
	}
	if err != nil {
		p.cmd.Process.Kill()
		return r, err
	}
	if _, err := p.stop(syscall.SIGKILL); err != nil {
		return r, err
	}
	if p, r.startKilled, err = start(ctx, cfg); err != nil {
		return r, err
	}
	r.rssKilled, _ = p.memory(&r.file[3])
	if r.p50K, r.p99K, err = search(ctx, p.c, cfg.queries); err != nil {
		p.cmd.Process.Kill()
		return r, err
	}
	r.rssKilledQueried, r.hwmKilled = p.memory(&r.file[4])
	fmt.Fprintf(log, "  start after SIGKILL %v\n", r.startKilled.Round(time.Millisecond))
	if _, err := p.stop(syscall.SIGTERM); err != nil {
		return r, err
	}
	return r, nil
}
