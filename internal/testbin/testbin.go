// Package testbin gives tests the real programs they run against: the
// hindsight binary built from this module, and the MCP servers from npm
// installed under internal/testdeps/npm (make deps).
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

// Root returns the module's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Hindsight builds ./cmd/hindsight once per test binary and returns its path.
// Set HINDSIGHT_TEST_RACE=1 to build it with the race detector.
func Hindsight(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hindsight-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "hindsight")
		args := []string{"build", "-o", buildPath}
		if os.Getenv("HINDSIGHT_TEST_RACE") != "" {
			args = append(args, "-race")
		}
		args = append(args, "./cmd/hindsight")
		cmd := exec.Command("go", args...)
		cmd.Dir = Root()
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build hindsight: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

// NPM returns the path of an executable installed by the test peers'
// package.json (internal/testdeps/npm), such as "mcp-server-everything".
// It fails the test with a hint when the peers are not installed.
func NPM(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Root(), "internal", "testdeps", "npm", "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed: run `make deps` (npm peers for the interop tests): %v", name, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH: %v", err)
	}
	return p
}
