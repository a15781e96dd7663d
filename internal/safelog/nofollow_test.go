package safelog

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLogNeverFollowsLink: a symbolic link at a log file's path is
// replaced by a regular file; its target is left as it was, and what is
// logged lands in the new file. Rotation does not follow a link either.
func TestLogNeverFollowsLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wrap-x.log")
	if err := os.Symlink(target, path); err != nil {
		if runtime.GOOS == "windows" {
			t.Skipf("no symlink privilege: %v", err)
		}
		t.Fatal(err)
	}
	f, err := Open(path, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	if f.Replaced() != target {
		t.Errorf("Replaced() = %q, want %q", f.Replaced(), target)
	}
	// A link planted between rotations is replaced too.
	os.Remove(path + ".1")
	if err := os.Symlink(target, path+".1"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := f.Write([]byte(strings.Repeat("x", 40) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Errorf("the link's target was written to: %q", b)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 && runtime.GOOS != "windows" {
		t.Fatalf("the log's path after: %v, %v; want a regular file, 0600", fi, err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "xxxx") {
		t.Errorf("the log holds %q", b)
	}
}

// TestOpenFileRefusesOtherKinds: a directory at a log file's path is
// refused, not written through.
func TestOpenFileRefusesOtherKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.log")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if f, _, err := OpenFile(path, os.O_APPEND); err == nil {
		f.Close()
		t.Fatal("a directory opened as a log")
	}
}
