package testkit

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files (and generated test data) instead of comparing with them")

// Update reports whether the test binary runs with -update, in which case
// tests rewrite their golden files and generated test data.
func Update() bool { return *update }

// Golden compares got with the file at path, or with -update writes got to
// path (creating its folder) first. A difference fails the test, naming the
// first line that differs and showing all of got.
func Golden[T ~string | ~[]byte](t testing.TB, path string, got T) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal([]byte(got), want) {
		t.Errorf("%s differs (rerun with -update if the change is meant): %s\ngot:\n%s", path, firstDiff([]byte(got), want), got)
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if i >= len(g) || i >= len(w) || !bytes.Equal(gl, wl) {
			return fmt.Sprintf("line %d\n got: %q\nwant: %q", i+1, gl, wl)
		}
	}
	return "same lines"
}
