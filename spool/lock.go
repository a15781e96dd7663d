//go:build unix || windows

package spool

import (
	"errors"
	"fmt"
	"os"

	"github.com/hindsight-proxy/hindsight/internal/filelock"
)

// errLocked reports a lock file held by a live process.
var errLocked = errors.New("locked by a live process")

// lockFile opens path (creating it, mode 0600) and takes an exclusive,
// non-blocking lock on it (flock on Unix, LockFileEx on Windows). The lock
// lives as long as the returned file is open, and dies with the process,
// however it ends.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := filelock.TryLock(f, false); err != nil {
		f.Close()
		if errors.Is(err, filelock.ErrWouldBlock) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// locked reports whether a live process holds the lock on path.
func locked(path string) bool { return filelock.Held(path) }
