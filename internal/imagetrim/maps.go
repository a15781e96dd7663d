package imagetrim

import (
	"strconv"
	"strings"
)

// A Mapping is one line of /proc/PID/maps (or a mapping's first line in
// smaps): its address range [Start, End), permissions ("r-xp", "rw-s"…)
// and path ("" for an anonymous one; spaces and a " (deleted)" suffix
// kept).
type Mapping struct {
	Start, End uintptr
	Perm, Path string
}

// ParseMapping parses such a line; ok is false for any other line.
func ParseMapping(line string) (m Mapping, ok bool) {
	rest := line
	var f [5]string
	for i := range f {
		rest = strings.TrimLeft(rest, " \t")
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			if i < 4 {
				return Mapping{}, false
			}
			end = len(rest)
		}
		f[i], rest = rest[:end], rest[end:]
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found || len(f[1]) != 4 {
		return Mapping{}, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return Mapping{}, false
	}
	return Mapping{Start: uintptr(s), End: uintptr(e), Perm: f[1], Path: strings.TrimSpace(rest)}, true
}
