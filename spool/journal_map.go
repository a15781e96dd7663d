//go:build linux

package spool

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// canMap reports that journal segments can be file mappings here.
const canMap = true

// mapSegment writes size zero bytes to f, a new segment, and maps them
// shared. Writing them makes the file system allocate (or reserve) their
// blocks and puts their pages in the page cache, so that a copy into the
// mapping never meets a full disk (which would fault) and costs no page
// allocation (fallocate(2) would leave the blocks unwritten, to be
// converted page by page on the relay's path).
func mapSegment(f *os.File, size int) ([]byte, error) {
	fd := int(f.Fd())
	for left := size; left > 0; left -= len(zeros) {
		if _, err := f.Write(zeros[:min(left, len(zeros))]); err != nil {
			return nil, fmt.Errorf("allocate journal: %w", err)
		}
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map journal: %w", err)
	}
	return mem, nil
}

// zeros is what mapSegment writes: never written to, its pages cost no
// memory.
var zeros [mapSegmentSize]byte

// unmapSegment undoes mapSegment.
func unmapSegment(mem []byte) { _ = unix.Munmap(mem) }
