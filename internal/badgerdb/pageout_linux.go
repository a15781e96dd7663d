package badgerdb

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PageOutTables asks the kernel to reclaim the pages of the process's
// shared mappings of dir's table files (*.sst), which Badger maps whole:
// a flatten writes every table it builds through its mapping and reads
// every table it merges, so afterwards the whole tree is resident. Pages
// out (MADV_PAGEOUT, Linux 5.4 and later; earlier kernels keep them)
// they are read back from the file when a read needs them. It never
// changes what a mapping holds, whatever is mapped at an address by the
// time it is advised, and returns the bytes advised.
func PageOutTables(dir string) (int64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	dir = filepath.Clean(dir) + string(filepath.Separator)
	var advised int64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		start, end, ok := tableMapping(sc.Text(), dir)
		if !ok {
			continue
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_PAGEOUT)
		if errno == unix.EINVAL {
			return advised, nil // before Linux 5.4
		}
		if errno == 0 {
			advised += int64(end - start)
		}
	}
	return advised, nil
}

// tableMapping parses a line of /proc/self/maps and reports the address
// range of a shared mapping of a table file directly under dir (which
// ends in a separator).
func tableMapping(line, dir string) (start, end uintptr, ok bool) {
	f := strings.Fields(line)
	if len(f) < 6 || len(f[1]) != 4 || f[1][3] != 's' {
		return 0, 0, false
	}
	path := strings.Join(f[5:], " ")
	if !strings.HasPrefix(path, dir) || !strings.HasSuffix(path, ".sst") || strings.ContainsRune(path[len(dir):], '/') {
		return 0, 0, false
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
