//go:build unix

package diskspace

import (
	"os"
	"syscall"
)

// allocatedSize is the disk space fi's file takes: its allocated blocks, at
// most its apparent size.
func allocatedSize(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return min(st.Blocks*512, fi.Size())
	}
	return fi.Size()
}
