//go:build windows

package diskspace

import "os"

// allocatedSize is fi's size: Badger's files on NTFS are not sparse.
func allocatedSize(fi os.FileInfo) int64 { return fi.Size() }
