// Package testbin gives tests the real programs they run against: the
// hindsight binary built from this module, and the MCP servers from npm
// installed under lab/testdeps/npm (make deps).
package testbin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// build is one binary of this module, built once per test binary into a
// temporary folder that Main removes, or taken from $HINDSIGHT_TEST_BIN_DIR
// (see Hindsight).
type build struct {
	once  sync.Once
	path  string
	built bool // into binDir
	err   error
	out   []byte
}

var (
	binDir     = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "hindsight-bin-") })
	lean, full build
)

// Main runs the package's tests and then removes the binaries Hindsight
// and HindsightFull built for them. A package whose tests use them calls
// it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if lean.built || full.built {
		if dir, err := binDir(); err == nil {
			os.RemoveAll(dir)
		}
	}
	return code
}

// Root returns the module's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Hindsight builds ./cmd/hindsight (the lean build) once per test binary
// and returns its path. Set HINDSIGHT_TEST_RACE=1 to build it with the race
// detector. When $HINDSIGHT_TEST_BIN_DIR is set (make test builds both
// binaries there once for all packages), it returns the hindsight there
// instead, and fails the test if there is none.
func Hindsight(t testing.TB) string {
	t.Helper()
	return lean.get(t, "hindsight")
}

// HindsightFull is Hindsight with ./cmd/hindsightd (every backend) built
// beside it, where "hindsight daemon" looks for it when the configuration
// needs Weaviate or an OpenAI-compatible endpoint. It returns the path of
// hindsight.
func HindsightFull(t testing.TB) string {
	t.Helper()
	full.get(t, "hindsightd")
	return lean.get(t, "hindsight")
}

func (b *build) get(t testing.TB, name string) string {
	t.Helper()
	b.once.Do(func() { b.resolve(name) })
	if b.err != nil {
		t.Fatalf("build %s: %v\n%s", name, b.err, b.out)
	}
	return b.path
}

// resolve finds the binary name in $HINDSIGHT_TEST_BIN_DIR, or builds it.
func (b *build) resolve(name string) {
	if shared := os.Getenv("HINDSIGHT_TEST_BIN_DIR"); shared != "" {
		if runtime.GOOS == "windows" {
			name += ".exe" // as go build -o dir/ names it
		}
		b.path = filepath.Join(shared, name)
		if _, b.err = os.Stat(b.path); b.err != nil {
			b.out = []byte("HINDSIGHT_TEST_BIN_DIR is set but holds no " + name)
		}
		return
	}
	dir, err := binDir()
	if err != nil {
		b.err = err
		return
	}
	b.path = filepath.Join(dir, name)
	args := []string{"build", "-o", b.path}
	if os.Getenv("HINDSIGHT_TEST_RACE") != "" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/"+name)
	cmd := exec.Command("go", args...)
	cmd.Dir = Root()
	b.out, b.err = cmd.CombinedOutput()
	b.built = true
}

// NPM returns the path of an executable installed by the test peers'
// package.json (lab/testdeps/npm), such as "mcp-server-everything".
// It fails the test with a hint when the peers are not installed.
func NPM(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Root(), "lab", "testdeps", "npm", "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed: run `make deps` (npm peers for the interop tests): %v", name, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	return p
}

// StopDaemon registers a cleanup that stops the daemon of home, if one runs
// when the test ends: it reads the pid from home's lock file, checks that
// the process is a hindsight daemon, sends SIGTERM and, if it is still
// there after 10 s, SIGKILL. Call it right after creating home (cleanups
// run last first, so the daemon stops before home is removed).
func StopDaemon(t testing.TB, home string) {
	t.Helper()
	t.Cleanup(func() {
		if err := stopDaemon(home, 10*time.Second); err != nil {
			t.Errorf("stop the daemon of %s: %v", home, err)
		}
	})
}

// stopDaemon stops the daemons of home, waiting up to grace after SIGTERM.
// It finds them by home's lock file and, for a daemon still starting (a
// sidecar that exited at once may have just spawned one), by scanning
// /proc for daemons whose environment names home.
func stopDaemon(home string, grace time.Duration) error {
	pids := daemonsOf(home)
	if b, err := os.ReadFile(filepath.Join(home, "daemon.lock")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && pid != os.Getpid() && isDaemon(pid) && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	var errs []error
	for _, pid := range pids {
		if err := terminatePid(pid); err != nil {
			continue // gone already
		}
		deadline := time.Now().Add(grace)
		for isDaemon(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if isDaemon(pid) {
			killPid(pid)
			errs = append(errs, fmt.Errorf("daemon pid %d ignored SIGTERM for %v; killed", pid, grace))
		}
	}
	return errors.Join(errs...)
}

// daemonsOf returns the live daemons whose environment has
// HINDSIGHT_HOME=home.
func daemonsOf(home string) []int {
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	want := []byte("HINDSIGHT_HOME=" + home + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !isDaemon(pid) {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && (bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...))) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// isDaemon reports whether pid is a live `hindsight … daemon` process (not
// a zombie, not another program that reused the pid).
func isDaemon(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	return len(args) > 1 && args[len(args)-1] == "daemon"
}
