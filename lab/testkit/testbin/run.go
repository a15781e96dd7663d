package testbin

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// Run runs `hindsight args…` (the lean build) with HINDSIGHT_HOME=home,
// in UTC, and returns its stdout. It fails the test when the command
// fails and wantErr is false, or succeeds and wantErr is true.
func Run(t testing.TB, home string, wantErr bool, args ...string) string {
	t.Helper()
	cmd := exec.Command(Hindsight(t), args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home, "TZ=UTC")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if (err != nil) != wantErr {
		t.Fatalf("hindsight %s: err %v (want error: %v)\nstderr: %s", strings.Join(args, " "), err, wantErr, stderr.String())
	}
	return stdout.String()
}

// Home is a new HINDSIGHT_HOME for the test: a folder with a path short
// enough for the daemon's socket, removed at the end of the test after
// its daemon, if one was started, is stopped (StopDaemon).
func Home(t testing.TB) string {
	t.Helper()
	home := testkit.ShortTempDir(t)
	StopDaemon(t, home)
	return home
}

// HomeWith is Home with config.yaml holding config.
func HomeWith(t testing.TB, config string) string {
	t.Helper()
	home := Home(t)
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(config), 0o600); err != nil {
		t.Fatalf("write config: %v", err)
	}
	return home
}
