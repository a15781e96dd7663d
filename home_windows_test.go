//go:build windows

package hindsight

import (
	"os"
	"path/filepath"
	"testing"
)

// Compiled by `make cross`; run only on Windows.

func TestDefaultHomeWindows(t *testing.T) {
	t.Setenv("LOCALAPPDATA", `C:\Users\u\AppData\Local`)
	if got, want := DefaultHome(), Home(`C:\Users\u\AppData\Local\Hindsight`); got != want {
		t.Fatalf("DefaultHome() = %q, want %q", got, want)
	}
}

// Ensure restricts the home's ACL and the home stays usable.
func TestEnsureRestricts(t *testing.T) {
	h := Home(filepath.Join(t.TempDir(), "home"))
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Path("x"), []byte("x"), 0o600); err != nil {
		t.Fatalf("write in the restricted home: %v", err)
	}
}
