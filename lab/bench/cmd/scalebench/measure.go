//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/bench"
)

// config is one measurement: a fresh home filled with steps.
type config struct {
	exe, home          string
	steps, taskSteps   int
	batch, resultBytes int
	idle               time.Duration // how long to measure the idle daemon's CPU (0: not)
}

// row is what one measurement found.
type row struct {
	steps, tasks int
	ingest       time.Duration // filling the home, said-final included
	reflect      time.Duration // from the last batch until reflection was done
	rssFilled    int64         // VmRSS once reflection was done and the daemon settled
	list         time.Duration // `hindsight traces list --json`
	show         time.Duration // `hindsight traces show --json` of the first task
	showBytes    int64
	showPeak     int64   // VmHWM over the show alone (reset before it)
	rssShown     int64   // VmRSS after the show, settled
	hwm          int64   // VmHWM before the show: the daemon's peak while filled
	idleCPU      float64 // share of a core used while idle, or -1
}

// settle is how long the daemon is left alone before its memory is read.
const settle = 5 * time.Second

// measure fills cfg.home through a daemon it starts, measures, and stops
// the daemon.
func measure(ctx context.Context, cfg config, log io.Writer) (row, error) {
	r := row{steps: cfg.steps}
	home := hindsight.Home(cfg.home)
	c, err := daemon.EnsureRunning(ctx, home, cfg.exe)
	if err != nil {
		return r, err
	}
	defer bench.StopDaemons(cfg.home, 30*time.Second)
	pid := daemon.LockHolder(home)
	if pid == 0 {
		return r, fmt.Errorf("measure: no daemon pid in %s", daemon.LockPath(home))
	}
	start := time.Now()
	gen := newSteps(cfg.resultBytes)
	for done := 0; done < cfg.steps; {
		task := fmt.Sprintf("scale-%07d", r.tasks)
		n := min(cfg.taskSteps, cfg.steps-done)
		for i := 0; i < n; i += cfg.batch {
			raws, err := gen.batch(task, i, min(cfg.batch, n-i))
			if err != nil {
				return r, err
			}
			if _, err := c.IngestRaw(ctx, raws); err != nil {
				return r, fmt.Errorf("ingest: %w", err)
			}
		}
		if _, err := c.FinalTask(ctx, daemon.FinalRequest{TaskID: task}); err != nil {
			return r, fmt.Errorf("say task final: %w", err)
		}
		done += n
		r.tasks++
		if r.tasks%100 == 0 {
			fmt.Fprintf(log, "  %d steps, %d tasks, %.0f steps/s\n", done, r.tasks, float64(done)/time.Since(start).Seconds())
		}
	}
	r.ingest = time.Since(start)
	if err := waitReflected(ctx, c); err != nil {
		return r, err
	}
	r.reflect = time.Since(start) - r.ingest
	time.Sleep(settle)
	if r.rssFilled, err = bench.ProcStatus(pid, "VmRSS"); err != nil {
		return r, err
	}
	if r.hwm, err = bench.ProcStatus(pid, "VmHWM"); err != nil {
		return r, err
	}
	if r.list, _, err = timeCLI(ctx, cfg, "traces", "list", "--json"); err != nil {
		return r, err
	}
	if err := resetPeak(pid); err != nil {
		return r, err
	}
	if r.show, r.showBytes, err = timeCLI(ctx, cfg, "traces", "show", "--json", "scale-0000000"); err != nil {
		return r, err
	}
	if r.showPeak, err = bench.ProcStatus(pid, "VmHWM"); err != nil {
		return r, err
	}
	time.Sleep(settle)
	if r.rssShown, err = bench.ProcStatus(pid, "VmRSS"); err != nil {
		return r, err
	}
	r.idleCPU, err = idleCPU(ctx, pid, cfg.idle)
	return r, err
}

// idleAfter is how long after its last request the daemon counts as idle:
// its disk guard allocates ahead for a minute after one.
const idleAfter = 65 * time.Second

// idleCPU returns the share of one core the process pid uses over d,
// starting idleAfter from now (the run time of all its threads, from
// /proc/PID/task/*/schedstat), or -1 when d is 0.
func idleCPU(ctx context.Context, pid int, d time.Duration) (float64, error) {
	if d <= 0 {
		return -1, nil
	}
	var before time.Duration
	for i, wait := range []time.Duration{idleAfter, d} {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
		ran, err := runTime(pid)
		if err != nil {
			return 0, err
		}
		if i == 0 {
			before = ran
			continue
		}
		return float64(ran-before) / float64(d), nil
	}
	return 0, nil
}

// resetPeak resets the peak resident size (VmHWM) of pid to its current
// one (Linux: 5 written to /proc/PID/clear_refs).
func resetPeak(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	return nil
}

// waitReflected waits until no final task waits for reflection.
func waitReflected(ctx context.Context, c *daemon.Client) error {
	for {
		st, err := c.Status(ctx)
		if err != nil {
			return fmt.Errorf("wait for reflection: %w", err)
		}
		if st.Reflection == nil {
			return nil // a daemon without reflection
		}
		if st.Reflection.Pending == 0 && (st.Traces == nil || st.Traces.Unqueued == 0) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// timeCLI runs `hindsight ARGS…` on cfg.home and returns how long it took
// and how many bytes it printed.
func timeCLI(ctx context.Context, cfg config, args ...string) (time.Duration, int64, error) {
	cmd := exec.CommandContext(ctx, cfg.exe, args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+cfg.home)
	var out countWriter
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("hindsight %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return time.Since(start), int64(out), nil
}

// countWriter counts what is written to it.
type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }

// steps makes the benchmark's steps: tools/call steps of one source, with
// a failure and its recovery every 50 steps.
type steps struct {
	seq    uint64
	at     time.Time
	result json.RawMessage
}

func newSteps(resultBytes int) *steps {
	text, _ := json.Marshal(strings.Repeat("x", resultBytes))
	return &steps{at: time.Now().Add(-time.Hour),
		result: json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`)}
}

func (g *steps) batch(task string, first, n int) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, n)
	for i := first; i < first+n; i++ {
		g.seq++
		g.at = g.at.Add(time.Millisecond)
		s := hindsight.Step{Source: "scalebench", Seq: g.seq, ExplicitTask: task, SessionID: "s-" + task,
			Server: "fs", Method: "tools/call", Tool: "read_file", Direction: hindsight.ClientToServer,
			Transport: "stdio", StartedAt: g.at, EndedAt: g.at.Add(500 * time.Microsecond), LatencyMS: 0.5,
			Arguments: json.RawMessage(fmt.Sprintf(`{"path":"/data/file-%d.txt"}`, i)), Result: g.result,
			CausalTag: hindsight.TagSuccess}
		switch i % 50 {
		case 10:
			s.IsError, s.ErrorCode, s.CausalTag = true, "ENOENT", hindsight.TagFailure
			s.Result = json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"ENOENT: no such file /data/file-%d.txt"}],"isError":true}`, i))
		case 11:
			s.CausalTag = hindsight.TagRecovery
		}
		b, err := json.Marshal(&s)
		if err != nil {
			return nil, fmt.Errorf("encode step: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}
