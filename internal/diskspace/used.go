package diskspace

import (
	"os"
	"path/filepath"
)

// DirSize returns the disk space used by the regular files under dir:
// allocated blocks, not apparent sizes (Badger preallocates sparse value
// logs far larger than what they hold).
func DirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		n += allocatedSize(fi)
		return nil
	})
	return n
}
