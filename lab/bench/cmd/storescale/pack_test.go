//go:build linux

package main

import (
	"os"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/memory"
)

// TestPackImports checks that the synthetic pack passes the daemon's
// import checks (the guard refuses text that reads as a command) and
// that every query is one.
func TestPackImports(t *testing.T) {
	files, qs, err := writePack(t.TempDir(), 3000, 1000, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 || len(qs) != 50 {
		t.Fatalf("%d files, %d queries; want 4 (3 and the extra one), 50", len(files), len(qs))
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		list, _, err := memory.ParseImport(data, memory.ImportOptions{}, nil, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		n += len(list)
	}
	if n != 3200 {
		t.Fatalf("%d experiences, want 3200", n)
	}
}
