package diskspace

import (
	"errors"
	"syscall"
)

// IsNoSpace reports whether err is the filesystem's "no space" (ENOSPC,
// EDQUOT, Windows's disk-full errors) or a write refused by Check (ErrLow).
func IsNoSpace(err error) bool {
	return errors.Is(err, ErrLow) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || isNoSpaceErrno(err)
}
