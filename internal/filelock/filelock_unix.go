//go:build unix

package filelock

import (
	"errors"
	"os"
	"syscall"
)

// TryLock takes an exclusive (or, with shared, a shared) flock on f without
// waiting. It returns ErrWouldBlock when another open file holds a
// conflicting lock, else the system's error.
func TryLock(f *os.File, shared bool) error {
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return ErrWouldBlock
		}
		return err
	}
	return nil
}

// Unlock drops the lock on f (closing f drops it too).
func Unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
