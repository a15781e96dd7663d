package badgerdb

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/hindsight-proxy/hindsight/internal/imagetrim"
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
	m, ok := imagetrim.ParseMapping(line)
	if !ok || m.Perm[3] != 's' || !strings.HasPrefix(m.Path, dir) || !strings.HasSuffix(m.Path, ".sst") ||
		strings.ContainsRune(m.Path[len(dir):], '/') {
		return 0, 0, false
	}
	return m.Start, m.End, true
}
