package fakeserver

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Recorded returns the lines a fake server recorded in the file record
// (see EnvRecord); a file not written yet reads as one empty line.
func Recorded(t testing.TB, record string) []string {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
