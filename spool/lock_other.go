//go:build !unix && !windows

package spool

import (
	"errors"
	"fmt"
	"os"
)

var errLocked = errors.New("locked by a live process")

// lockFile creates path exclusively. Without flock a lock left by a
// killed process is not detected as stale; such outboxes must be drained
// by hand.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, errLocked
	}
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	return f, nil
}

// locked reports whether path exists: without flock, a lock file is held
// until its owner removes it.
func locked(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
