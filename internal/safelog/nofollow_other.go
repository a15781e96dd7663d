//go:build !unix

package safelog

import (
	"fmt"
	"os"
)

// openNoFollow opens path with flag unless a symbolic link (or another
// reparse point) is at path: Windows has no O_NOFOLLOW, so the path is
// looked at first, and the file opened is checked to be the one looked at.
func openNoFollow(path string, flag int) (*os.File, error) {
	before, err := os.Lstat(path)
	if err == nil && before.Mode()&(os.ModeSymlink|os.ModeIrregular) != 0 {
		return nil, fmt.Errorf("%s is a link", path)
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	after, lerr := os.Lstat(path)
	opened, serr := f.Stat()
	if lerr != nil || serr != nil || after.Mode()&(os.ModeSymlink|os.ModeIrregular) != 0 || !os.SameFile(after, opened) {
		f.Close()
		return nil, fmt.Errorf("%s changed into a link while opened", path)
	}
	return f, nil
}
