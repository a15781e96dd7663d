//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
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

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on every Linux this runs on).
const clockTick = 10 * time.Millisecond

// cpuTicks returns the user and system time of pid so far, in clock
// ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis, where field 3 (state) starts.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("read CPU time: unexpected %q", b)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read CPU time: %w", err)
		}
		ticks += n
	}
	return ticks, nil
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }

// procStatus returns a size field of /proc/PID/status (VmRSS, VmHWM) in
// bytes.
func procStatus(pid int, field string) (int64, error) {
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
