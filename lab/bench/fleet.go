//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FleetResult is the memory of n sidecars sharing one HINDSIGHT_HOME (and
// so one daemon), each wrapping its own echo server, after each made the
// same calls: resident set now (VmRSS), its private part (RssAnon) and its
// peak (VmHWM), per sidecar, in bytes; and their sums, RSS (which counts
// the binary's pages, shared by all, once per sidecar) and PSS (which
// shares them out: what the sidecars take together).
type FleetResult struct {
	Servers           int
	RSSMedian, RSSMax int64
	AnonMedian        int64
	HWMMedian, HWMMax int64
	RSSSum, PSSSum    int64
}

// Fleet starts n copies of argv (a sidecar wrapping the echo server) with
// env, makes calls echo calls through each (one at a time, all sidecars in
// turn), waits a second for capture to settle, and reads their memory
// before closing them.
func Fleet(ctx context.Context, argv, env []string, n, calls int) (FleetResult, error) {
	res := FleetResult{Servers: n}
	procs := make([]*Process, 0, n)
	defer func() {
		for _, p := range procs {
			_ = p.Close(closeGrace)
		}
	}()
	args := echoArgs(256)
	for i := range n {
		p, err := Start(argv, env)
		if err != nil {
			return res, fmt.Errorf("fleet: sidecar %d: %w", i, err)
		}
		procs = append(procs, p)
		if err := Prepare(ctx, p.Client, args, calls); err != nil {
			return res, fmt.Errorf("fleet: sidecar %d: %w (stderr: %s)", i, err, strings.TrimSpace(p.Stderr()))
		}
	}
	time.Sleep(time.Second)
	var rss, anon, hwm []int64
	for _, p := range procs {
		var v [3]int64
		for i, field := range []string{"VmRSS", "RssAnon", "VmHWM"} {
			var err error
			if v[i], err = ProcStatus(p.PID(), field); err != nil {
				return res, err
			}
		}
		pss, err := procPSS(p.PID())
		if err != nil {
			return res, err
		}
		rss, anon, hwm = append(rss, v[0]), append(anon, v[1]), append(hwm, v[2])
		res.RSSSum += v[0]
		res.PSSSum += pss
	}
	slices.Sort(rss)
	slices.Sort(anon)
	slices.Sort(hwm)
	res.RSSMedian, res.RSSMax = rss[n/2], rss[n-1]
	res.AnonMedian = anon[n/2]
	res.HWMMedian, res.HWMMax = hwm[n/2], hwm[n-1]
	return res, nil
}

// ProcStatus returns a size field of /proc/PID/status (VmRSS, VmHWM) in
// bytes.
func ProcStatus(pid int, field string) (int64, error) {
	return procSize(fmt.Sprintf("/proc/%d/status", pid), field)
}

// procPSS returns pid's proportional set size in bytes
// (/proc/PID/smaps_rollup): its private pages, plus each shared page
// divided by the number of processes mapping it.
func procPSS(pid int) (int64, error) {
	return procSize(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss")
}

// procSize returns the "field: N kB" line of a /proc file in bytes.
func procSize(path, field string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", field, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(v) // "12345 kB"
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("read %s: unexpected %q", field, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("read %s: not in %s", field, path)
}
