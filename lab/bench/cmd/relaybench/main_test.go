//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestMain lets the test binary stand in for relaybench itself when the
// driver starts its echo and relay modes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "echo" || os.Args[1] == "relay") {
		if err := dispatch(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(testbin.Main(m))
}

// TestSmokeDriver runs the driver end to end with tiny counts: real echo
// server, relay and sidecar processes, the Markdown table and the checks.
func TestSmokeDriver(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"-rounds", "2", "-duration", "0", "-calls", "40", "-warmup", "10",
		"-concurrency", "1,4", "-pace", "2000", "-settle", "10ms", "-hindsight", testbin.Hindsight(t), "-v"}
	if err := run(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errOut.String())
	}
	md := out.String()
	for _, want := range []string{
		"| path | calls/s (4 in flight) | vs relay | p50 | p99 | calls/s (1 in flight) | p50 | p99 |",
		"| path (its own process) | CPU/call (4 in flight) | syscalls/call | daemon CPU/call | all processes' CPU/call | peak RSS | peak private | RSS at rest (private) |",
		"| direct |", "| relay |", "| sidecar |", "| sidecar-nocapture |",
		"| sidecar's throughput vs relay's, 4 in flight |", "| capture's cost in p50, 1 in flight |",
		"| calls/s (1 in flight, 2000/s) |", "| capture's cost in p50, 1 in flight, 2000/s |",
		"Each measurement started on a quiet machine", "of 24 measurements started after 10ms without",
		"| path (own process + daemon) | CPU/call (4 in flight) | daemon's part | × relay | p50 (1) × relay | p99 (1) × relay | calls/s (4) × relay | peak RSS / PSS | daemon peak RSS / PSS |",
		"| relay | ", "| 1.00× | 1.00× | 1.00× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("output lacks %q:\n%s", want, md)
		}
	}
	// The capturing sidecar's row of the reference table: its CPU, its
	// daemon's part, the ratios to the relay and the memory of both read.
	// Not its CPU's ratio to the relay's: the relay's CPU over a few
	// calls is often below the clock tick, and then the ratio is "–".
	row := tableRow(md, "| path (own process + daemon)", "| sidecar |")
	cells := strings.Split(row, "|")
	if len(cells) != 11 || slices.Contains(cells[2:4], " – ") || slices.Contains(cells[5:10], " – ") {
		t.Errorf("sidecar's cost row lacks a figure: %q\n%s", row, md)
	}
	// 2 rounds × (2 concurrencies + paced) × 4 variants, one progress line each.
	if n := strings.Count(errOut.String(), "in flight"); n != 24 {
		t.Errorf("%d progress lines, want 24:\n%s", n, errOut.String())
	}
}

// tableRow returns the line starting with prefix in the table whose
// header starts with header.
func tableRow(md, header, prefix string) string {
	_, table, _ := strings.Cut(md, header)
	table, _, _ = strings.Cut(table, "\n\n")
	for line := range strings.SplitSeq(table, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// TestSmokeFleet runs the fleet mode with two capturing sidecars on one
// daemon: one row per count, with each sidecar's memory read.
func TestSmokeFleet(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"-servers", "1,2", "-calls", "5", "-hindsight", testbin.Hindsight(t)}
	if err := fleet(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("fleet: %v\nstderr:\n%s", err, errOut.String())
	}
	md := out.String()
	for _, want := range []string{"| sidecars | RSS, median | private, median |", "| PSS, all sidecars |", "\n| 1 | ", "\n| 2 | "} {
		if !strings.Contains(md, want) {
			t.Errorf("output lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| 0.0 MB |") {
		t.Errorf("a sidecar's memory read as zero:\n%s", md)
	}
}

func TestDriverRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-concurrency", "1,x"}, `"x" is not a positive number`},
		{[]string{"-concurrency", "0"}, `"0" is not a positive number`},
		{[]string{"-variants", "direct,warp"}, `unknown variant "warp"`},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tt.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error()+errOut.String(), tt.want) {
			t.Errorf("run %v: err = %v, want one saying %q", tt.args, err, tt.want)
		}
		if out.Len() != 0 {
			t.Errorf("run %v wrote to stdout: %s", tt.args, out.String())
		}
	}
}
