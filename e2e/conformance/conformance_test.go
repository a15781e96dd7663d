//go:build unix

package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// TestMain removes the hindsight binary the test built.
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }

// suiteVersion is the conformance suite lab/testdeps/npm pins.
const suiteVersion = "0.2.0-alpha.12"

// revisions are the requirement sets, each with the everything-server's
// path that speaks its wire: the stateful handler for 2025-11-25, the
// stateless one for 2026-07-28.
var revisions = []struct{ name, path string }{
	{"2025-11-25", "/mcp"},
	{"2026-07-28", "/stateless/mcp"},
}

// TestConformanceThroughServe runs every scenario of both requirement sets
// directly against the everything-server and through `hindsight serve
// --upstream`, all four runs at once, prints the figures, and fails for
// each check that passes directly but not through Hindsight. A scenario
// that loses checks is run through Hindsight once more (alone, so a
// timing-sensitive scenario gets a quiet machine), and the second run is
// the one compared.
func TestConformanceThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, two sidecars and the conformance suite; not in -short mode")
	}
	node, suite := findSuite(t)
	upstream := startEverything(t)

	type leg struct {
		revision, url string
		dir           string
		res           run
		err           error
	}
	var legs []*leg
	for _, rev := range revisions {
		direct := upstream + rev.path
		legs = append(legs,
			&leg{revision: rev.name, url: direct},
			&leg{revision: rev.name, url: startServe(t, direct)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i, l := range legs {
		l.dir = filepath.Join(t.TempDir(), strconv.Itoa(i))
		wg.Go(func() {
			l.err = runSuite(ctx, node, suite, l.dir, l.url, "--requirements", l.revision)
			if l.err == nil {
				l.res, l.err = readRun(l.dir)
			}
		})
	}
	wg.Wait()
	for _, l := range legs {
		if l.err != nil {
			t.Fatalf("conformance %s against %s: %v", l.revision, l.url, l.err)
		}
	}

	var tables []string
	for i := 0; i < len(legs); i += 2 {
		direct, through := legs[i], legs[i+1]
		lost := losses(direct.res, through.res)
		for _, sc := range lostScenarios(lost) {
			t.Logf("%s: %s lost checks through hindsight serve; running it once more", through.revision, sc)
			if err := runSuite(ctx, node, suite, through.dir, through.url, "--scenario", sc, "--spec-version", through.revision, "--force"); err != nil {
				t.Fatalf("conformance %s, scenario %s again through hindsight: %v", through.revision, sc, err)
			}
		}
		if len(lost) > 0 {
			var err error
			if through.res, err = readRun(through.dir); err != nil {
				t.Fatal(err)
			}
			lost = losses(direct.res, through.res)
		}
		unscored, err := notScored(filepath.Dir(filepath.Dir(suite)), direct.revision)
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, table(direct.revision, direct.res, through.res, unscored, lost))
		for _, l := range lost {
			t.Errorf("%s: passes directly, not through hindsight serve: %s", direct.revision, l)
		}
	}
	t.Logf("conformance suite %s, server mode, everything-server directly and through hindsight serve --upstream:\n%s", suiteVersion, strings.Join(tables, "\n"))
}

func lostScenarios(lost []loss) []string {
	m := map[string]bool{}
	for _, l := range lost {
		m[l.scenario] = true
	}
	return sortedKeys(m)
}

// runSuite runs the suite's server mode against url, results under dir.
// The suite's exit status says whether scenarios failed, which is the
// comparison's business, so only a run that wrote no results is an error.
func runSuite(ctx context.Context, node, suite, dir, url string, args ...string) error {
	all := append([]string{suite, "server", "--url", url, "-o", dir}, args...)
	cmd := exec.CommandContext(ctx, node, all...)
	cmd.Dir = filepath.Dir(dir)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return fmt.Errorf("run the suite: %w\n%s", ctx.Err(), out)
	}
	if _, statErr := os.Stat(dir); statErr != nil {
		return fmt.Errorf("run the suite: no results (%v): %v\n%s", statErr, err, out)
	}
	return nil
}

// findSuite returns Node ≥ 22 and the suite's entry point: the ones `make
// deps` installs under lab/testdeps/npm, or a node on PATH. Without
// them the test skips, except under CI=true, where it fails.
func findSuite(t *testing.T) (node, suite string) {
	t.Helper()
	missing := t.Skipf
	if os.Getenv("CI") == "true" {
		missing = t.Fatalf
	}
	npm := filepath.Join(testbin.Root(), "lab", "testdeps", "npm", "node_modules")
	pkg := filepath.Join(npm, "@modelcontextprotocol", "conformance")
	var meta struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(pkg, "package.json")); err != nil || json.Unmarshal(b, &meta) != nil || meta.Version != suiteVersion {
		missing("the conformance suite %s is not installed under %s (run `make deps`): found %q, %v", suiteVersion, npm, meta.Version, err)
	}
	for _, cand := range []string{filepath.Join(npm, ".bin", "node"), "node"} {
		p, err := exec.LookPath(cand)
		if err != nil {
			continue
		}
		if major := nodeMajor(p); major >= 22 {
			return p, filepath.Join(pkg, "dist", "index.js")
		}
	}
	missing("no Node 22 or later: neither %s (run `make deps`) nor a node on PATH", filepath.Join(npm, ".bin", "node"))
	return "", ""
}

var nodeVersionRE = regexp.MustCompile(`^v(\d+)\.`)

// nodeMajor returns the major version of the node at path, 0 if unknown.
func nodeMajor(path string) int {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return 0
	}
	m := nodeVersionRE.FindSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// startEverything builds and starts the everything-server and returns its
// base URL.
func startEverything(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "everything")
	build := exec.Command("go", "build", "-o", bin, "./lab/testkit/conformance/everything")
	build.Dir = testbin.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the everything-server: %v\n%s", err, out)
	}
	stdout, stderr := start(t, nil, bin)
	go io.Copy(io.Discard, stderr)
	return awaitLine(t, "everything-server", stdout, regexp.MustCompile(`listening on (http://\S+)`))
}

// startServe runs `hindsight serve --upstream url` with a home of its own
// and returns the URL it serves on.
func startServe(t *testing.T, url string) string {
	t.Helper()
	home := t.TempDir()
	testbin.StopDaemon(t, home)
	_, stderr := start(t, []string{"HINDSIGHT_HOME=" + home}, testbin.Hindsight(t), "serve", "--listen", "127.0.0.1:0", "--upstream", url)
	return awaitLine(t, "hindsight serve", stderr, regexp.MustCompile(`on (http://[^ ]+/mcp)`))
}

// start runs a program in its own process group, stopped at the end of the
// test, and returns its stdout and stderr.
func start(t *testing.T, env []string, name string, args ...string) (stdout, stderr io.Reader) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return out, errp
}

// awaitLine reads r until a line matches re and returns its first group;
// the lines after it go to the test log.
func awaitLine(t *testing.T, who string, r io.Reader, re *regexp.Regexp) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		close(found)
		for sc.Scan() {
		}
	}()
	select {
	case url, ok := <-found:
		if !ok {
			t.Fatalf("%s exited before it listened", who)
		}
		return url
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not report its address", who)
	}
	return ""
}
