//go:build !unix

package embedded

import (
	"io"
	"os"
)

// mapRegion reads n bytes of f from off into memory: where files cannot
// be mapped and then renamed over (Windows), the vectors live on the
// heap.
func mapRegion(f *os.File, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(io.NewSectionReader(f, off, n), b)
	return b, err
}

// unmapRegion releases what mapRegion returned (the collector does).
func unmapRegion([]byte) error { return nil }
