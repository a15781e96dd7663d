//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// writeTable prints the measurements as a Markdown table.
func writeTable(w io.Writer, taskSteps int, rows []row) {
	fmt.Fprintf(w, "| stored steps | tasks (%d steps each) | ingest | reflected after | daemon RSS | peak RSS | `traces list` | `traces show` (bytes) | peak RSS in show | RSS after show | idle CPU |\n", taskSteps)
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		idle := "-"
		if r.idleCPU >= 0 {
			idle = fmt.Sprintf("%.2f%%", 100*r.idleCPU)
		}
		fmt.Fprintf(w, "| %d | %d | %.0f steps/s | %s | %s | %s | %s | %s (%s) | %s | %s | %s |\n",
			r.steps, r.tasks, float64(r.steps)/r.ingest.Seconds(), r.reflect.Round(100*time.Millisecond),
			mb(r.rssFilled), mb(r.hwm), r.list.Round(time.Millisecond), r.show.Round(time.Millisecond), mb(r.showBytes),
			mb(r.showPeak), mb(r.rssShown), idle)
	}
}

// runTime returns the time pid's threads have run so far: the sum of
// the first field of each /proc/PID/task/TID/schedstat, in nanoseconds.
func runTime(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("read run time of %d: no threads (%v)", pid, err)
	}
	var total time.Duration
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // a thread that ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read run time: %q: %w", b, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
