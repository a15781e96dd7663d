//go:build unix

package embedded

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapRegion maps n bytes of f from off (a multiple of the page size)
// read-only. The mapping outlives f and the file's name.
func mapRegion(f *os.File, off, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	return unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
}

// unmapRegion releases what mapRegion returned.
func unmapRegion(b []byte) error {
	if b == nil {
		return nil
	}
	return unix.Munmap(b)
}
