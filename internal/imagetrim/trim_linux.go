//go:build linux

package imagetrim

import (
	"bufio"
	"bytes"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Trim drops the pages of the executable's read-only private mappings
// (code and read-only data) from the process's page tables and returns
// the bytes of mappings it advised. A mapping holding a page of its own
// (copied on a write, as a relocation would) is left alone.
func Trim() int64 {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0
	}
	var total int64
	for _, m := range readOnlyImage(data, exe) {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno == 0 {
			total += int64(m.end - m.start)
		}
	}
	return total
}

// A span is a mapping's address range [start, end).
type span struct{ start, end uintptr }

// readOnlyImage returns the mappings in smaps (the text of
// /proc/PID/smaps) of the file exe that are private, not writable, and
// hold no anonymous page.
func readOnlyImage(smaps []byte, exe string) []span {
	var out []span
	var cur span
	in := false // the mapping being read is a candidate
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		if m, ok := ParseMapping(line); ok {
			in = m.Path == exe && (m.Perm == "r-xp" || m.Perm == "r--p")
			cur = span{m.Start, m.End}
			continue
		}
		f := strings.Fields(line)
		if !in || len(f) < 2 || f[0] != "Anonymous:" {
			continue
		}
		in = false
		if f[1] == "0" {
			out = append(out, cur)
		}
	}
	return out
}
