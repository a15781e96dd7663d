//go:build windows

package diskspace

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// Free returns the bytes the calling user may still write on the volume that
// holds path (quotas included).
func Free(path string) (int64, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return 0, fmt.Errorf("free space of %s: %w", path, err)
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, fmt.Errorf("GetDiskFreeSpaceEx %s: %w", path, err)
	}
	return int64(avail), nil
}

// Size returns the size of the volume that holds path, in bytes.
func Size(path string) (int64, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", path, err)
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, fmt.Errorf("GetDiskFreeSpaceEx %s: %w", path, err)
	}
	return int64(total), nil
}
