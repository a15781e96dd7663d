//go:build windows

package diskspace

import (
	"errors"

	"golang.org/x/sys/windows"
)

// isNoSpaceErrno reports Windows's own "disk full" errors, which are not
// syscall.ENOSPC there.
func isNoSpaceErrno(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}
