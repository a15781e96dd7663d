package diskspace

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func allocateFile(path string, ahead int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil // rotated away meanwhile
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	size := fi.Size()
	// The first hole is where Badger's sequential writes have not reached.
	hole, err := f.Seek(0, 4) // SEEK_HOLE
	if err != nil || hole >= size {
		return nil
	}
	n := min(ahead, size-hole)
	if n <= 0 {
		return nil
	}
	for {
		err = syscall.Fallocate(int(f.Fd()), 0, hole, n)
		if err != syscall.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%w: cannot allocate %d bytes ahead in %s: %w", ErrLow, n, path, err)
	}
	return nil // EOPNOTSUPP and the like: nothing to do
}
