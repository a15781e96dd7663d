package testbin

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestSharedBinDir: with HINDSIGHT_TEST_BIN_DIR set, the binary there is
// used as it is, and nothing is built.
func TestSharedBinDir(t *testing.T) {
	dir := t.TempDir()
	name := "hindsight"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	want := filepath.Join(dir, name)
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HINDSIGHT_TEST_BIN_DIR", dir)
	var b build
	if got := b.get(t, "hindsight"); got != want {
		t.Errorf("get = %q, want %q", got, want)
	}
	if b.built {
		t.Error("built a binary although the shared folder holds one")
	}
	t.Setenv("HINDSIGHT_TEST_BIN_DIR", t.TempDir())
	var missing build
	missing.resolve("hindsight")
	if missing.err == nil || missing.built {
		t.Errorf("an empty shared folder: err %v, built %v", missing.err, missing.built)
	}
}
