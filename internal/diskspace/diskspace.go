// Package diskspace keeps Hindsight's processes alive on a full disk.
//
// Badger writes its memtable logs, value logs and tables through
// memory-mapped files that it sizes with ftruncate, so their blocks are
// allocated only when a page is first written. When the filesystem has no
// block to give, the kernel answers that write with SIGBUS, which the Go
// runtime turns into a fatal error: the process dies, whatever it was doing.
// A write(2) on a full disk, by contrast, just fails with ENOSPC.
//
// So writers check, before they hand Badger anything, that the filesystem
// keeps a reserve free (Check, with statfs), and make the blocks of the
// mapped files Badger is writing real ahead of its write position
// (AllocateAhead, with fallocate): a mapped write that lands in allocated
// blocks cannot fault. Code that must open or write a mapped file on its
// own goroutine runs it under Contain, which turns a fault into an error.
package diskspace

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
)

// ErrLow marks a write refused because the filesystem has less free space
// than its reserve.
var ErrLow = errors.New("disk space low")

// Default reserves: the free space below which Hindsight's processes stop
// writing to Badger. They cover what Badger can still write on its own once
// it was handed a write (a memtable log it rotates into, a memtable flushed
// to a table, a compaction of a few tables): the sidecar's outbox runs 4 MiB
// memtables, the daemon 16 MiB ones.
const (
	DefaultSidecarReserve = 32 << 20
	DefaultDaemonReserve  = 64 << 20
)

// ReserveFor returns the reserve to keep on the filesystem that holds
// path, from a reserve set by the caller (a configuration's): set when
// positive, none (0, no check) when negative, and when 0, def fitted to
// the filesystem's size (FitReserve; a filesystem whose size cannot be
// read keeps def).
func ReserveFor(path string, reserve, def int64) int64 {
	if reserve != 0 {
		return max(reserve, 0)
	}
	size, err := Size(path)
	if err != nil {
		return def
	}
	return FitReserve(def, size)
}

// FitReserve returns def, or a quarter of a filesystem of size bytes when
// that is less: a reserve as large as a small filesystem (a 64 MiB one on
// an 8 MiB home) would keep it "full" while it is empty, and the daemon
// would never start.
func FitReserve(def, size int64) int64 {
	if size <= 0 {
		return def
	}
	return min(def, size/4)
}

// FitAhead returns def, or a sixty-fourth of a filesystem of size bytes
// when that is less (at least 64 KiB): how far ahead of Badger's write
// position its logs are allocated, so that the allocations of a few
// databases do not take a small filesystem's room.
func FitAhead(def, size int64) int64 {
	if size <= 0 {
		return def
	}
	return min(def, max(size/64, 64<<10))
}

// ParseBytes reads a byte count: digits, optionally followed by k, m or g
// (powers of 1024, case-insensitive, an optional trailing "b" or "ib").
func ParseBytes(s string) (int64, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "b"), "i")
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "g"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n < 0 {
		return 0, fmt.Errorf("parse byte count %q: not a non-negative number", s)
	}
	return n * mult, nil
}

// Check returns nil when the filesystem holding path has more than
// reserve+need bytes free, else an error wrapping ErrLow that says how much
// is free. A reserve of 0 turns the check off. A statfs that fails (path
// gone) is not a shortage: the write that follows reports its own error.
func Check(path string, reserve, need int64) error {
	if reserve <= 0 {
		return nil
	}
	free, err := Free(path)
	if err != nil {
		return nil
	}
	return CheckFree(path, free, reserve, need)
}

// CheckFree is Check with the filesystem's free space known: free.
func CheckFree(path string, free, reserve, need int64) error {
	if reserve > 0 && free < reserve+need {
		return fmt.Errorf("%w: %d bytes free on the filesystem of %s, %d kept in reserve", ErrLow, free, path, reserve)
	}
	return nil
}

// AllocateAhead is Allocator.Ahead with an Allocator of its own: it
// looks for each log's written data from the file's start.
func AllocateAhead(dir string, ahead int64) error {
	var a Allocator
	return a.Ahead(dir, ahead)
}

// Contain runs f with the goroutine's panic-on-fault set, so that a memory
// fault in f (a write through a mapped file that the filesystem cannot
// back: SIGBUS) becomes an error wrapping ErrLow instead of killing the
// process. Other panics propagate.
func Contain(what string, f func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if re, ok := r.(interface{ Addr() uintptr }); ok {
			err = fmt.Errorf("%s: %w: memory fault at %#x (a mapped file the filesystem could not back)", what, ErrLow, re.Addr())
			return
		}
		panic(r)
	}()
	return f()
}
