//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestMain lets the test binary stand in for servebench itself when the
// driver starts its echo and bridge modes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "echo" || os.Args[1] == "bridge") {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		err := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(testbin.Main(m))
}

// TestSmokeServeBench runs the driver end to end with tiny counts: real
// bridge, serve and echo processes over real HTTP, the table and the
// ratios.
func TestSmokeServeBench(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"-rounds", "2", "-clients", "3", "-calls", "5", "-variants", "bridge,serve,serve-nocapture",
		"-hindsight", testbin.Hindsight(t), "-v"}
	if err := run(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errOut.String())
	}
	md := out.String()
	for _, want := range []string{
		"3 clients × 5 echo calls (one session and one echo child each), 2 interleaved rounds",
		"| front door | calls/s | p50 | p99 | CPU/call (own process) | daemon CPU/call | peak RSS | peak PSS |",
		"| bridge | ", "| serve | ", "| serve-nocapture | ",
		"Same-round ratios against bridge",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("output lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| 0.0 MB |") || strings.Contains(md, "NaN") || strings.Contains(md, "Inf") {
		t.Errorf("a figure was not read:\n%s", md)
	}
	// calls/s and p50 always have a ratio.
	if !regexp.MustCompile(`\| serve \| \d+\.\d\d× \| \d+\.\d\d× \|`).MatchString(md) {
		t.Errorf("no ratio row for serve:\n%s", md)
	}
	// 2 rounds × 3 variants, one progress line each.
	if n := strings.Count(errOut.String(), "calls/s"); n != 6 {
		t.Errorf("%d progress lines, want 6:\n%s", n, errOut.String())
	}
}

func TestServeBenchRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-variants", "bridge,serf"}, `unknown variant "serf"`},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
		{[]string{"-compare", "serve=/bin/true"}, "with a NAME of its own"},
		{[]string{"-compare", "old"}, "want NAME=BINARY"},
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
