//go:build linux

package traces

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"golang.org/x/sys/unix"
)

// rssFile returns this process's resident pages of mapped files (RssFile).
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestTrimMappedGivesBackStepPages: steps written and read through
// Badger's mapped value log stay resident until trimMapped pages them
// out, which leaves them readable.
func TestTrimMappedGivesBackStepPages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ts := openTestStore(t, dir, tasktest.NewClock(t0))
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", 8<<10) + `"}`)
	var steps []hindsight.Step
	for i := range 4000 { // about 32 MB of value log
		s := step("src", uint64(i+1), 0)
		s.ExplicitTask, s.Result = "t", big
		steps = append(steps, s)
	}
	for i := 0; i < len(steps); i += 100 {
		if _, err := ts.Ingest(ctx, steps[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	read := func() int {
		n := 0
		if err := ts.Steps(ctx, []string{"t"}, func(*hindsight.Step) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	read()
	before := rssFile(t)
	err := trimMapped(dir)
	if errors.Is(err, unix.EINVAL) {
		t.Skip("this kernel has no MADV_PAGEOUT")
	}
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if before-after < 16<<20 {
		t.Errorf("RssFile %d MB before, %d MB after: want at least 16 MB given back", before>>20, after>>20)
	}
	if n := read(); n != len(steps) {
		t.Errorf("%d steps read after the trim, want %d", n, len(steps))
	}
}
