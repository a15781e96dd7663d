//go:build unix

package hindsight

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnsureTightensOwnHome: an existing home and logs folder that others
// may write are set to 0700.
func TestEnsureTightensOwnHome(t *testing.T) {
	h := Home(filepath.Join(t.TempDir(), "home"))
	for _, d := range []string{string(h), h.Logs()} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{string(h), h.Logs()} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", d, fi.Mode().Perm(), err)
		}
	}
}

// TestEnsureRefusesOthersHome: a home, or a logs folder, that another user
// owns is refused with an error naming it, and nothing is created in it.
// Giving a directory away needs root.
func TestEnsureRefusesOthersHome(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	const other = 54321
	for _, which := range []string{"home", "logs"} {
		t.Run(which, func(t *testing.T) {
			h := Home(filepath.Join(t.TempDir(), "home"))
			if err := os.MkdirAll(h.Logs(), 0o700); err != nil {
				t.Fatal(err)
			}
			given := string(h)
			if which == "logs" {
				given = h.Logs()
			}
			if err := os.Chown(given, other, other); err != nil {
				t.Fatal(err)
			}
			os.Chmod(given, 0o777)
			err := h.Ensure()
			if !errors.Is(err, ErrNotYours) || !strings.Contains(err.Error(), given) || !strings.Contains(err.Error(), "uid 54321") {
				t.Fatalf("Ensure: %v, want ErrNotYours naming %s and its owner", err, given)
			}
			if fi, _ := os.Stat(given); fi.Mode().Perm() != 0o777 {
				t.Errorf("another user's directory was changed: %v", fi.Mode().Perm())
			}
		})
	}
}
