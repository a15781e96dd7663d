//go:build linux

package spool

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// canMap reports that journal segments can be file mappings here.
const canMap = true

// segmentZeros is what mapSegment writes, block after block: read, never
// written, so that making a segment allocates nothing. It is small because
// its pages stay resident once the kernel has read them.
var segmentZeros [16 << 10]byte

// mapSegment writes size zero bytes to f, a new segment, and maps them
// shared. Writing them makes the file system allocate (or reserve) their
// blocks and puts their pages in the page cache, so that a copy into the
// mapping never meets a full disk (which would fault) and costs no page
// allocation (fallocate(2) would leave the blocks unwritten, to be
// converted page by page on the relay's path).
func mapSegment(f *os.File, size int) ([]byte, error) {
	fd := int(f.Fd())
	for left := size; left > 0; {
		n := min(left, len(segmentZeros))
		if _, err := f.Write(segmentZeros[:n]); err != nil {
			return nil, fmt.Errorf("allocate journal: %w", err)
		}
		left -= n
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map journal: %w", err)
	}
	return mem, nil
}

// unmapSegment undoes mapSegment.
func unmapSegment(mem []byte) { _ = unix.Munmap(mem) }
