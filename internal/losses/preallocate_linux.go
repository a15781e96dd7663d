package losses

import (
	"errors"
	"os"
	"syscall"
)

// preallocate allocates the blocks of f's first size bytes, so that later
// writes there cannot fail for want of space. A filesystem without
// fallocate is not an error.
func preallocate(f *os.File, size int64) error {
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, size); err != nil && !errors.Is(err, syscall.EOPNOTSUPP) {
		return err
	}
	return nil
}
