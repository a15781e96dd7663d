//go:build windows

package filelock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// Windows locks are mandatory on the bytes they cover: a reader of a locked
// range fails. So the lock covers one byte far past any content (LockFileEx
// may lock beyond the end of a file), and the file's bytes (a daemon's pid)
// stay readable by everyone.
const (
	lockOffsetHigh = 1 << 30 // byte 2^62
	lockLen        = 1
)

// TryLock takes an exclusive (or, with shared, a shared) LockFileEx lock on
// f without waiting. It returns ErrWouldBlock when another open file holds a
// conflicting lock, else the system's error.
func TryLock(f *os.File, shared bool) error {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if !shared {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, lockLen, 0, ol)
	if err != nil {
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING) {
			return ErrWouldBlock
		}
		return err
	}
	return nil
}

// Unlock drops the lock on f (closing f drops it too).
func Unlock(f *os.File) error {
	ol := &windows.Overlapped{OffsetHigh: lockOffsetHigh}
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, lockLen, 0, ol)
}
