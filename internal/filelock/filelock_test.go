package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Two open files of one path exclude each other as two processes would;
// the locked file's bytes stay readable; closing the holder frees the lock.
func TestExclusiveSharedAndRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	a, b := open(t, path), open(t, path)
	if err := TryLock(a, false); err != nil {
		t.Fatalf("first exclusive lock: %v", err)
	}
	if _, err := a.WriteAt([]byte("42\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := TryLock(b, false); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("second exclusive lock: %v, want ErrWouldBlock", err)
	}
	if err := TryLock(b, true); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("shared probe of a held lock: %v, want ErrWouldBlock", err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "42\n" {
		t.Fatalf("read the locked file: %q, %v", got, err)
	}
	a.Close()
	if err := TryLock(b, true); err != nil {
		t.Fatalf("shared lock after the holder closed: %v", err)
	}
	if err := Unlock(b); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if err := TryLock(b, false); err != nil {
		t.Fatalf("exclusive lock after unlock: %v", err)
	}
}
