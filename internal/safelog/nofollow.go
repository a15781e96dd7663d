package safelog

import (
	"fmt"
	"os"
)

// OpenFile opens the log file path for writing (flag adds O_APPEND or
// O_TRUNC), creating it mode 0600, without following a symbolic link at
// path: a link there (a leftover, or planted so that log lines land in
// its target) is removed, not what it points to, and a regular file
// created in its place; replaced then names the link's target, for the
// caller to report. A path that is neither a file nor a link (a FIFO, a
// directory) is refused.
func OpenFile(path string, flag int) (f *os.File, replaced string, err error) {
	f, err = openNoFollow(path, flag|os.O_CREATE|os.O_WRONLY)
	if err != nil {
		fi, lerr := os.Lstat(path)
		if lerr != nil || fi.Mode()&os.ModeSymlink == 0 {
			return nil, "", fmt.Errorf("open log: %w", err)
		}
		replaced, _ = os.Readlink(path)
		if replaced == "" {
			replaced = "?"
		}
		if err := os.Remove(path); err != nil {
			return nil, "", fmt.Errorf("open log: remove the link at %s: %w", path, err)
		}
		// O_EXCL: a link planted again meanwhile is not followed either.
		if f, err = openNoFollow(path, flag|os.O_CREATE|os.O_EXCL|os.O_WRONLY); err != nil {
			return nil, "", fmt.Errorf("open log: %w", err)
		}
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("open log: %w", err)
	}
	return f, replaced, nil
}
