//go:build unix

package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

// TestEnsureRunningSaysWhyAtOnce: a daemon that fails to start (here a
// program that prints why and exits 1, as `hindsight daemon` does when it
// needs hindsightd) is reported with its own words as soon as it exits,
// not after StartTimeout with a pointer to a log it never opened.
func TestEnsureRunningSaysWhyAtOnce(t *testing.T) {
	dir := testkit.ShortTempDir(t)
	exe := filepath.Join(dir, "fake-hindsight")
	script := "#!/bin/sh\necho 'hindsight: configuration needs hindsightd (install it: go install …/cmd/hindsightd)' >&2\nexit 1\n"
	if err := os.WriteFile(exe, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	home := hindsight.Home(filepath.Join(dir, "home"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := EnsureRunning(ctx, home, exe)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "needs hindsightd") || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("err = %v; want the daemon's own words, before any deadline", err)
	}
	if fi, err := os.Stat(home.Path("logs", "daemon-start.err")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("start errors file: %v %v", fi, err)
	}
}
