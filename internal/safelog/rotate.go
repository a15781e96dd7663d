package safelog

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

// Defaults of a File's rotation.
const (
	DefaultMaxBytes = 10 << 20
	DefaultKeep     = 3
)

// File is a log file rotated by size: once a write takes it past MaxBytes,
// PATH becomes PATH.1 (PATH.1 becomes PATH.2, and so on up to Keep; the
// oldest goes) and a new PATH is opened, mode 0600. Several processes may
// append to one path (sidecars of the same server): one that finds PATH
// replaced under it by another's rotation reopens it rather than rotating
// again.
type File struct {
	path     string
	maxBytes int64
	keep     int

	mu       sync.Mutex
	f        *os.File
	size     int64
	replaced string // the target of a link found at path, if any (see OpenFile)
}

// Replaced returns the target of the symbolic link that was at the file's
// path and was replaced by a regular file, or "".
func (l *File) Replaced() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.replaced
}

// Open opens (creating) path for appending, never through a symbolic
// link (see OpenFile). maxBytes 0: DefaultMaxBytes,
// <0: never rotate; keep 0: DefaultKeep.
func Open(path string, maxBytes int64, keep int) (*File, error) {
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if keep <= 0 {
		keep = DefaultKeep
	}
	l := &File{path: path, maxBytes: maxBytes, keep: keep}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *File) open() error {
	f, replaced, err := OpenFile(l.path, os.O_APPEND)
	if err != nil {
		return err
	}
	if replaced != "" {
		l.replaced = replaced
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log: %w", err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Write appends p, rotating first when the file is full.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, os.ErrClosed
	}
	if l.maxBytes > 0 && l.size > 0 && l.size+int64(len(p)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			// Keep logging where we are rather than lose the line.
			fmt.Fprintf(os.Stderr, "hindsight: rotate %s: %v\n", l.path, err)
		}
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate shifts the old files and opens a new PATH; l.mu is held.
func (l *File) rotate() error {
	cur, err := l.f.Stat()
	if err != nil {
		return err
	}
	if onDisk, err := os.Stat(l.path); err == nil && !os.SameFile(cur, onDisk) {
		// Another process rotated: follow it.
		l.f.Close()
		return l.open()
	}
	for i := l.keep - 1; i >= 1; i-- {
		os.Rename(l.path+"."+strconv.Itoa(i), l.path+"."+strconv.Itoa(i+1))
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	l.f.Close()
	return l.open()
}

// Close closes the file.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
