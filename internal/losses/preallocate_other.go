//go:build !linux

package losses

import "os"

// preallocate sizes f to size bytes where there is no fallocate (macOS,
// Windows): the blocks may still be allocated lazily, so a ledger on a full
// disk can fail to flush there, which Linux's fallocate rules out.
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }
