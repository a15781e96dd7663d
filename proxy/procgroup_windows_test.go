//go:build windows

package proxy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Compiled by `make cross` (go vet with GOOS=windows); run only on Windows.

// A child in its Job object dies with kill, grandchildren included, and
// release closes the job.
func TestJobKillsTree(t *testing.T) {
	// cmd.exe waits on a grandchild (ping) that would run for a minute;
	// killing the job must end both.
	cmd := exec.Command("cmd.exe", "/c", "ping -n 60 127.0.0.1 >NUL")
	prepareGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := newGroup(cmd)
	if g.job == 0 {
		t.Fatal("the child is in no Job object")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	g.kill()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the child outlived TerminateJobObject")
	}
	g.release()
	g.release() // idempotent
	g.kill()    // after release: only the (gone) child, no stale handle
}

// A bare command name finds its .cmd shim through PATHEXT, as `npx` does,
// and the shim runs.
func TestCmdShim(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "fakenpx.cmd")
	if err := os.WriteFile(shim, []byte("@echo off\r\necho shim %1\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd := exec.Command("fakenpx", "ok")
	if !strings.EqualFold(cmd.Path, shim) {
		t.Fatalf("fakenpx resolved to %q, want %q (err %v)", cmd.Path, shim, cmd.Err)
	}
	prepareGroup(cmd)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "shim ok" {
		t.Fatalf("shim printed %q", got)
	}
}
