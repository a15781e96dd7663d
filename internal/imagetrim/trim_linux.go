//go:build linux

package imagetrim

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

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
		line := sc.Bytes()
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if s, e, ok := parseRange(f[0]); ok && len(f) >= 5 {
			in = false
			perm := string(f[1])
			if mappedPath(line) == exe && (perm == "r-xp" || perm == "r--p") {
				cur, in = span{s, e}, true
			}
			continue
		}
		if !in || string(f[0]) != "Anonymous:" || len(f) < 2 {
			continue
		}
		in = false
		if string(f[1]) == "0" {
			out = append(out, cur)
		}
	}
	return out
}

// mappedPath returns the path of a mapping's header line in smaps (the
// text after its first five fields, which may hold spaces), or "".
func mappedPath(line []byte) string {
	rest := line
	for range 5 {
		rest = bytes.TrimLeft(rest, " \t")
		i := bytes.IndexAny(rest, " \t")
		if i < 0 {
			return ""
		}
		rest = rest[i:]
	}
	return string(bytes.TrimSpace(rest))
}

// parseRange parses a mapping's "start-end" field (hexadecimal).
func parseRange(b []byte) (start, end uintptr, ok bool) {
	dash := bytes.IndexByte(b, '-')
	if dash <= 0 {
		return 0, 0, false
	}
	s, err1 := strconv.ParseUint(string(b[:dash]), 16, 64)
	e, err2 := strconv.ParseUint(string(b[dash+1:]), 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false
	}
	return uintptr(s), uintptr(e), true
}
