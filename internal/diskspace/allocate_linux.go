package diskspace

import (
	"errors"
	"fmt"
	"syscall"
)

// allocateFile allocates the blocks of the ahead bytes of path (the log
// called name in its directory) past its first hole, where Badger's
// sequential writes have not reached, and returns the file's mark for the
// next call. mark is that of the previous call: when it marks the same
// file, the hole is looked for from its hole on (see firstHole).
func allocateFile(path, name string, ahead int64, mark logMark) (logMark, error) {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return logMark{}, nil // rotated away meanwhile
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return logMark{}, nil
	}
	cur := logMark{name: name, dev: uint64(st.Dev), ino: st.Ino, size: st.Size}
	from := int64(0)
	if mark.same(cur) {
		from = mark.hole
	}
	hole, err := firstHole(fd, from)
	if err != nil {
		return logMark{}, nil // no SEEK_HOLE here
	}
	cur.hole = hole
	n := min(ahead, cur.size-hole)
	if n <= 0 {
		return cur, nil
	}
	for {
		err = syscall.Fallocate(fd, 0, hole, n)
		if err != syscall.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return cur, nil
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		return logMark{}, fmt.Errorf("%w: cannot allocate %d bytes ahead in %s: %w", ErrLow, n, path, err)
	}
	return cur, nil // EOPNOTSUPP and the like: nothing to do
}

// seekHole is lseek's SEEK_HOLE.
const seekHole = 4

// firstHole returns the offset of fd's first hole. from is where the
// first hole of the same file was before (0 when unknown): the bytes
// before it were data then, and data stays, so the hole is looked for
// from there; the kernel walks the file's extents (and, for blocks
// allocated ahead but not written, its cached pages) up to the hole, which
// from the start costs in proportion to what the log holds. When the byte
// before from is no longer data (the file was cut, or is another one that
// took its name and inode), it looks from the start.
func firstHole(fd int, from int64) (int64, error) {
	if from > 0 {
		hole, err := syscall.Seek(fd, from-1, seekHole)
		if err != nil {
			return 0, err
		}
		if hole != from-1 {
			return hole, nil
		}
	}
	return syscall.Seek(fd, 0, seekHole)
}
