//go:build unix

package e2e

// Small answers made honest, each shown with the real programs.

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/internal/testkit"
	"github.com/hindsight-proxy/hindsight/internal/testkit/testbin"
)

// TestSearchBrowsingCountsNoHit: `experiences search` shows lessons
// without counting hits on them (browsing changes no ranking); --hit
// counts, and --no-hit is still accepted. `experiences list` marks a
// pinned lesson.
func TestSearchBrowsingCountsNoHit(t *testing.T) {
	e := newEnv(t)
	e.seed(t, hindsight.Experience{ID: "browse-1", Tool: "fetch_report", Lesson: "Call login before fetch_report; it fails with 401 otherwise."})
	hits := func() int {
		t.Helper()
		x, err := e.client.Experience(context.Background(), "", "browse-1")
		if err != nil {
			t.Fatal(err)
		}
		return x.HitCount
	}
	for _, args := range [][]string{{"fetch_report", "login"}, {"--no-hit", "fetch_report"}, {"--json", "login"}} {
		out := runCLI(t, e.exe, string(e.home), append([]string{"experiences", "search"}, args...)...)
		if !strings.Contains(out, "browse-1") {
			t.Fatalf("search %v does not show the lesson:\n%s", args, out)
		}
	}
	if n := hits(); n != 0 {
		t.Errorf("after three searches: hit_count %d, want 0", n)
	}
	runCLI(t, e.exe, string(e.home), "experiences", "search", "--hit", "fetch_report")
	if n := hits(); n != 1 {
		t.Errorf("after a search with --hit: hit_count %d, want 1", n)
	}

	if out := runCLI(t, e.exe, string(e.home), "experiences", "list"); !strings.Contains(out, " active ") || strings.Contains(out, "pinned") {
		t.Errorf("an unpinned lesson's state:\n%s", out)
	}
	runCLI(t, e.exe, string(e.home), "experiences", "pin", "browse-1")
	if out := runCLI(t, e.exe, string(e.home), "experiences", "list"); !strings.Contains(out, " pinned ") {
		t.Errorf("a pinned lesson is not marked:\n%s", out)
	}
}

// TestCommandWaitsForStoppingDaemon: a command run while a daemon stops
// (it holds the lock and no longer answers; here the test holds the lock)
// starts a daemon that loses the lock, waits for the lock to be let go,
// then starts one that answers, and succeeds.
func TestCommandWaitsForStoppingDaemon(t *testing.T) {
	skipShort(t)
	testbin.Hindsight(t)
	home := hindsight.Home(testbin.Home(t))
	lock, err := daemon.AcquireLock(home)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	cli := run(t, home, "experiences", "list", "--json")
	// The daemon the command started found the lock taken.
	testkit.WaitFor(t, "the command's daemon to lose the lock", 30*time.Second, func() bool {
		b, _ := os.ReadFile(home.Path("logs", "daemon-start.err"))
		return strings.Contains(string(b), daemon.ErrAlreadyRunning.Error()) || cli.exited()
	})
	if cli.exited() {
		t.Fatalf("the command ended while the lock was held: %v\n%s", cli.err, cli.stderr)
	}
	lock.Release()
	if err := cli.wait(t, time.Minute); err != nil {
		t.Fatalf("command run while a daemon stopped: %v\n%s", err, cli.stderr)
	}
	if _, err := daemon.NewClient(home.Socket()).Health(context.Background()); err != nil {
		t.Errorf("no daemon answers after the command: %v", err)
	}
}
