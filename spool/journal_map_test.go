//go:build linux

package spool

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestMapSegmentZeroFilled: a new mapped segment, of the usual size or
// larger than the block of zeros it is written from, is that many zero
// bytes on disk and in its mapping.
func TestMapSegmentZeroFilled(t *testing.T) {
	for _, size := range []int{mapSegmentSize, mapSegmentSize + 11*4096} {
		f, err := defaultOpenSegment(filepath.Join(t.TempDir(), "segment"))
		if err != nil {
			t.Fatal(err)
		}
		mem, err := mapSegment(f, size)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != int64(size) || len(mem) != size || !bytes.Equal(mem, make([]byte, size)) {
			t.Errorf("segment of %d: file %d bytes, mapping %d bytes, zero %v", size, fi.Size(), len(mem), bytes.Equal(mem, make([]byte, size)))
		}
		mem[0] = 1 // a record written into the mapping does not reach the zeros' block
		unmapSegment(mem)
		f.Close()
		if segmentZeros != [len(segmentZeros)]byte{} {
			t.Fatal("the block of zeros was written to")
		}
	}
}
