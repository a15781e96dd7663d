//go:build unix

package capture

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// errLocked reports a lock file held by a live process.
var errLocked = errors.New("locked by a live process")

// lockFile opens path (creating it, mode 0600) and takes an exclusive,
// non-blocking flock on it. The lock lives as long as the returned file is
// open, and dies with the process, however it ends.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("flock: %w", err)
	}
	return f, nil
}
