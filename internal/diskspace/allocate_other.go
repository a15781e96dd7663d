//go:build !linux

package diskspace

// allocateFile does nothing outside Linux: there is no fallocate (macOS's
// F_PREALLOCATE does not fill holes at an offset, Windows has no sparse
// mapped files from Badger to fill), so such filesystems are left as they
// are, as a Linux filesystem without fallocate is.
func allocateFile(path, name string, ahead int64, mark logMark) (logMark, error) {
	return logMark{}, nil
}
