//go:build linux

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/bench"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestSmokeScale runs the benchmark end to end at a tiny size: a real
// daemon filled through its socket, reflection waited for, the CLI timed,
// the table printed with a row whose counts are the ones asked for.
func TestSmokeScale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon and waits for its memory to settle")
	}
	var out, errOut bytes.Buffer
	args := []string{"-sizes", "250", "-task-steps", "100", "-batch", "30", "-result-bytes", "64",
		"-hindsight", testbin.Hindsight(t)}
	if err := run(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errOut.String())
	}
	md := out.String()
	if !strings.Contains(md, "| stored steps | tasks (100 steps each) |") || !strings.Contains(md, "\n| 250 | 3 | ") {
		t.Errorf("table lacks the header or the row of 250 steps in 3 tasks:\n%s", md)
	}
	if strings.Contains(md, "| 0 MB |") {
		t.Errorf("a memory column reads 0 MB:\n%s", md)
	}
}

func TestParseSizes(t *testing.T) {
	if got, err := bench.ParseCounts("10000, 100000"); err != nil || len(got) != 2 || got[1] != 100000 {
		t.Errorf("ParseCounts: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-5", "1e6", "10,x"} {
		if _, err := bench.ParseCounts(bad); err == nil {
			t.Errorf("bench.ParseCounts(%q) accepted", bad)
		}
	}
}
