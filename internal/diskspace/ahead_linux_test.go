package diskspace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAllocatorFollowsLogs writes logs as Badger does (sparse files
// written from their start, a new one when full, one recreated under a
// name and size it had before) and checks after each Ahead that the blocks
// ahead of the write position are allocated, and that the hole the
// Allocator found from its mark is the one a look from the file's start
// finds.
func TestAllocatorFollowsLogs(t *testing.T) {
	const (
		size  = 16 << 20
		ahead = 1 << 20
	)
	dir := t.TempDir()
	var a Allocator
	var f *os.File
	open := func(name string) {
		t.Helper()
		if f != nil {
			f.Close()
		}
		var err error
		if f, err = os.Create(filepath.Join(dir, name)); err == nil {
			err = f.Truncate(size)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() { f.Close() }()
	check := func(name string, written int64) {
		t.Helper()
		if err := a.Ahead(dir, ahead); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, name), &st); err != nil {
			t.Fatal(err)
		}
		if got := st.Blocks * 512; got < written+ahead {
			if got <= written {
				t.Skipf("the filesystem did not allocate (%d bytes for %d written); fallocate or SEEK_HOLE unsupported here", got, written)
			}
			t.Fatalf("%s: %d bytes allocated with %d written, want %d ahead of them", name, got, written, ahead)
		}
		fd, err := syscall.Open(filepath.Join(dir, name), syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		want, err := syscall.Seek(fd, 0, seekHole)
		if err != nil {
			t.Fatal(err)
		}
		if m := a.marks[dir+"\x00.mem"]; m.name != name || m.hole != want {
			t.Fatalf("mark %+v, want %s's first hole at %d", m, name, want)
		}
	}
	write := func(from, to int64) {
		t.Helper()
		if _, err := f.WriteAt(make([]byte, to-from), from); err != nil {
			t.Fatal(err)
		}
	}
	open("00001.mem")
	write(0, 4096)
	check("00001.mem", 4096)
	for _, w := range []int64{64 << 10, 3 << 20, 7<<20 + 4096} {
		write(4096, w)
		check("00001.mem", w)
	}
	open("00002.mem") // rotated: a new log
	write(0, 8192)
	check("00002.mem", 8192)
	write(8192, 5<<20)
	check("00002.mem", 5<<20)
	if err := os.Remove(filepath.Join(dir, "00002.mem")); err != nil {
		t.Fatal(err)
	}
	open("00002.mem") // the same name and size, maybe the same inode
	write(0, 4096)
	check("00002.mem", 4096)
	write(4096, 3<<20)
	check("00002.mem", 3<<20)
	err := f.Truncate(4096) // cut, and grown back to its size
	if err == nil {
		err = f.Truncate(size)
	}
	if err != nil {
		t.Fatal(err)
	}
	write(4096, 8192)
	check("00002.mem", 8192)
}
