package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFirstDiff(t *testing.T) {
	for _, c := range []struct{ got, want, line string }{
		{"a\nb\n", "a\nc\n", "line 2"},
		{"a\n", "a\nb\n", "line 2"},
		{"x", "y", "line 1"},
	} {
		if d := firstDiff([]byte(c.got), []byte(c.want)); !strings.HasPrefix(d, c.line) {
			t.Errorf("firstDiff(%q, %q) = %q, want %s", c.got, c.want, d, c.line)
		}
	}
}

// TestGoldenMatches passes for equal content, as a string or as bytes.
func TestGoldenMatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	if err := os.WriteFile(path, []byte("same\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Golden(t, path, "same\n")
	Golden(t, path, []byte("same\n"))
}
