//go:build linux

// Command storescale measures the daemon's embedded experience store as
// it grows, through the daemon as a user runs it: for each size it
// writes a pack of synthetic experiences, starts `hindsight daemon` in a
// fresh home, imports the pack with `hindsight experiences import` (in
// files of at most -file experiences), and reports the import rate, how
// long a graceful stop (SIGTERM) takes, the time from starting the
// daemon to its first search answer after a clean stop and after a
// SIGKILL, the daemon's resident memory (VmRSS) in each state, and
// search latency (p50/p99 over the daemon's socket, hits counted, as a
// sidecar's queries are). Before the SIGKILL the daemon takes a small
// import and counted searches, so that the crash lands right after
// writes.
//
// With -baseline, another build (today's main, say) is measured the same
// way in the same run, first, for sizes up to -baseline-max.
//
//	go run ./lab/bench/cmd/storescale -sizes 100000 -baseline /tmp/hs-main/hindsight
//	go run ./lab/bench/cmd/storescale -sizes 1000000
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

func main() { bench.Main("storescale", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("storescale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		sizes       = fs.String("sizes", "100000", "experiences to measure at, comma-separated")
		bin         = fs.String("hindsight", "", "hindsight binary (default: build ./cmd/hindsight)")
		baseline    = fs.String("baseline", "", "another hindsight binary to measure first, the same way")
		baselineMax = fs.Int("baseline-max", 100000, "largest size the baseline is measured at")
		perFile     = fs.Int("file", 100000, "experiences per imported file")
		queries     = fs.Int("queries", 500, "counted searches per measurement of latency")
		keep        = fs.Bool("keep", false, "keep the homes (their paths are printed)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, err := bench.ParseCounts(*sizes)
	if err != nil {
		return fmt.Errorf("parse -sizes: %w", err)
	}
	if *perFile <= 0 || *queries <= 0 {
		return errors.New("-file and -queries must be positive")
	}
	tmp, exe, cleanup, err := bench.Workspace(ctx, "storescale-", *bin, *keep, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var rows []row
	for _, n := range ns {
		files, qs, err := writePack(filepath.Join(tmp, "pack-"+strconv.Itoa(n)), n, *perFile, *queries)
		if err != nil {
			return err
		}
		builds := []struct{ name, exe string }{{"this build", exe}}
		if *baseline != "" && n <= *baselineMax {
			builds = append([]struct{ name, exe string }{{"baseline", *baseline}}, builds...)
		}
		for _, b := range builds {
			home := filepath.Join(tmp, fmt.Sprintf("home-%d-%d", n, len(rows)))
			fmt.Fprintf(stderr, "%s, %d experiences (home %s) …\n", b.name, n, home)
			r, err := measure(ctx, config{name: b.name, exe: b.exe, home: home, files: files, queries: qs, n: n}, stderr)
			if err != nil {
				return fmt.Errorf("%s at %d: %w", b.name, n, err)
			}
			rows = append(rows, r)
		}
	}
	writeTable(stdout, rows)
	return nil
}
