//go:build linux

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// allCPU returns the CPU time used so far by every process a measurement
// of variant p involves: this driver (the client), p, p's descendants (the
// server behind a relay or a sidecar) and the daemons of home (none when
// home is ""). On a machine whose cores the measurement saturates,
// throughput × this per call ≈ the number of cores: it shows where a
// variant's throughput went. Descendants that exited meanwhile are not
// counted; -1 when p's own time cannot be read.
func allCPU(p *Process, home string) time.Duration {
	own, err := cpuTime(p.PID())
	if err != nil {
		return -1
	}
	total := own + selfCPU()
	for _, pid := range descendants(p.PID()) {
		if d, err := cpuTime(pid); err == nil {
			total += d
		}
	}
	if home != "" {
		if d, err := daemonCPU(home); err == nil && d > 0 {
			total += d
		}
	}
	return total
}

// selfCPU is this process's user and system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// descendants lists the processes below pid, from /proc/PID/task/*/children.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}
