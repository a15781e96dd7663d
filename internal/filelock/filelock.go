// Package filelock takes advisory, non-blocking locks on open files: flock
// on Unix, LockFileEx on Windows. A lock lives as long as the file it was
// taken on stays open, and dies with the process, however it ends.
package filelock

import "errors"

// ErrWouldBlock reports a lock held by another open file (another process,
// or another descriptor of this one).
var ErrWouldBlock = errors.New("file lock held elsewhere")
