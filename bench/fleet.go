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
// same calls: resident set now (VmRSS) and at its peak (VmHWM), per
// sidecar, in bytes.
type FleetResult struct {
	Servers           int
	RSSMedian, RSSMax int64
	HWMMedian, HWMMax int64
	RSSSum            int64
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
	var rss, hwm []int64
	for _, p := range procs {
		r, err := ProcStatus(p.PID(), "VmRSS")
		if err != nil {
			return res, err
		}
		h, err := ProcStatus(p.PID(), "VmHWM")
		if err != nil {
			return res, err
		}
		rss, hwm = append(rss, r), append(hwm, h)
		res.RSSSum += r
	}
	slices.Sort(rss)
	slices.Sort(hwm)
	res.RSSMedian, res.RSSMax = rss[n/2], rss[n-1]
	res.HWMMedian, res.HWMMax = hwm[n/2], hwm[n-1]
	return res, nil
}

// ProcStatus returns a size field of /proc/PID/status (VmRSS, VmHWM) in
// bytes.
func ProcStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
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
	return 0, fmt.Errorf("read %s: not in /proc/%d/status", field, pid)
}
