//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
)

// figure returns the numbers of the report's row that starts with name.
func figure(t *testing.T, out, name string) []float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(name) + ` \| (.*) \|$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no row %q in the report:\n%s", name, out)
	}
	var nums []float64
	for _, f := range regexp.MustCompile(`[0-9]+(\.[0-9]+)?`).FindAllString(m[1], -1) {
		v, _ := strconv.ParseFloat(f, 64)
		nums = append(nums, v)
	}
	return nums
}

// TestSmoke runs the harness at tiny numbers on a real 3-node cluster
// (without the node kill, whose restart alone takes 10–15 s): it answers
// searches, costs about one round trip a search at k = 1 and k = 3, and
// loses no edit and no lesson.
func TestSmoke(t *testing.T) {
	if _, err := os.Stat(weaviatetest.Binary()); err != nil {
		t.Skipf("weaviate-server not found at %s: %v", weaviatetest.Binary(), err)
	}
	if testing.Short() {
		t.Skip("starts a 3-node cluster; skipped in -short")
	}
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"-daemons", "4", "-lessons", "200", "-namespaces", "2", "-duration", "4s",
		"-think", "100ms", "-kill", "none", "-same-every", "2s", "-dir", t.TempDir()}, &out, &errs)
	if err != nil {
		t.Fatalf("teamload: %v\n%s", err, errs.String())
	}
	t.Logf("%s", out.String())
	report := out.String()
	if n := figure(t, report, "searches answered"); n[0] == 0 {
		t.Errorf("no search answered")
	}
	if rt := figure(t, report, "round trips per search, k=1 / k=3"); rt[0] < 1 || rt[0] >= 1.5 || rt[1] < 1 || rt[1] >= 1.5 {
		t.Errorf("round trips per search %v: want about 1 at both k", rt)
	}
	if e := figure(t, report, "edits and pins acknowledged / lost"); e[1] != 0 {
		t.Errorf("edits lost: %v", e)
	}
	if l := figure(t, report, "lessons reflections stored / lost / still deferred at the end"); l[0] == 0 || l[1] != 0 || l[2] != 0 {
		t.Errorf("lessons stored / lost: %v", l)
	}
	if h := figure(t, report, "hits: returned / stored / lost (daemons counted lost)"); h[0] == 0 {
		t.Errorf("no hit recorded: %v", h)
	}
}
