//go:build unix || windows

package filelock

import "os"

// Held reports whether another open file holds an exclusive lock on path.
// It probes with a shared lock, which it drops at once; a path that cannot
// be opened is not held.
func Held(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := TryLock(f, true); err != nil {
		return true
	}
	_ = Unlock(f)
	return false
}
