//go:build linux

package traces

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// trimMapped asks the kernel to page out (MADV_PAGEOUT, Linux 5.4 on) the
// pages of files under dir that this process maps, as /proc/self/maps
// lists them. Paging out loses nothing: a mapped file's pages are written
// back first and read again on the next access, and an address the
// mapping left since the listing is at worst paged out too (anonymous
// memory goes to swap, if any, and comes back on access).
func trimMapped(dir string) error {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return fmt.Errorf("read mappings: %w", err)
	}
	defer f.Close()
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var errs []error
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], prefix) {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT); e != 0 {
			errs = append(errs, fmt.Errorf("page out %s: %w", fields[5], e))
			if e == unix.EINVAL { // a kernel before 5.4
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("read mappings: %w", err))
	}
	return errors.Join(errs...)
}
