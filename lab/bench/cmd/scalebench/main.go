//go:build linux

// Command scalebench measures what the daemon costs as the stored work
// grows: for each size it fills a fresh home with that many steps through
// the daemon's real ingest path (POST /v1/steps over its socket, batches
// of -batch), in tasks of -task-steps steps each said final (so reflection
// reads them), waits for reflection to finish, and reports the ingest
// rate, the daemon's resident memory (VmRSS, and VmHWM, its peak) and the
// latency of `traces list` and of a streamed `traces show` of the largest
// task; with -idle, the share of a core the daemon uses doing nothing
// from a minute after its last request (its threads' run time, from
// /proc/PID/task/*/schedstat).
//
// With no -hindsight flag it builds ./cmd/hindsight into a temporary
// directory first, so run it from the module's root:
//
//	go run ./lab/bench/cmd/scalebench -sizes 10000,100000 -idle 60s
//	go run ./lab/bench/cmd/scalebench -sizes 100000 -task-steps 100000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/hindsight-proxy/hindsight/lab/bench"
)

func main() { bench.Main("scalebench", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scalebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		sizes     = fs.String("sizes", "10000,100000", "stored steps to measure at, comma-separated (1000000 takes long)")
		taskSteps = fs.Int("task-steps", 500, "steps per task")
		batch     = fs.Int("batch", 100, "steps per POST /v1/steps")
		result    = fs.Int("result-bytes", 1024, "bytes of text in each step's result")
		bin       = fs.String("hindsight", "", "hindsight binary (default: build ./cmd/hindsight)")
		keep      = fs.Bool("keep", false, "keep the homes (their paths are printed)")
		idle      = fs.Duration("idle", 0, "at the end of each size, a minute after the last request, measure the idle daemon's CPU over this long (0: not)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, err := bench.ParseCounts(*sizes)
	if err != nil {
		return fmt.Errorf("parse -sizes: %w", err)
	}
	if *taskSteps <= 0 || *batch <= 0 {
		return errors.New("-task-steps and -batch must be positive")
	}
	tmp, exe, cleanup, err := bench.Workspace(ctx, "scalebench-", *bin, *keep, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var rows []row
	for _, n := range ns {
		home := filepath.Join(tmp, "home-"+strconv.Itoa(n))
		fmt.Fprintf(stderr, "%d steps in tasks of %d (home %s) …\n", n, *taskSteps, home)
		r, err := measure(ctx, config{exe: exe, home: home, steps: n, taskSteps: *taskSteps, batch: *batch, resultBytes: *result, idle: *idle}, stderr)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	writeTable(stdout, *taskSteps, rows)
	return nil
}
