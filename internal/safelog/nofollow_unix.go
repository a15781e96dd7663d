//go:build unix

package safelog

import (
	"os"
	"syscall"
)

// openNoFollow opens path with flag; with O_NOFOLLOW, a symbolic link at
// path fails the open (ELOOP) instead of being followed.
func openNoFollow(path string, flag int) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW, 0o600)
}
