package diskspace

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestContainFault reads a mapped page past the end of its file, which the
// kernel answers with SIGBUS, as it answers a write the filesystem cannot
// back: Contain returns an error instead of the process dying.
func TestContainFault(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "short"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := os.Getpagesize()
	if err := f.Truncate(int64(page)); err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	err = Contain("write past the end", func() error {
		m[page+1] = 1
		return nil
	})
	if !errors.Is(err, ErrLow) {
		t.Fatalf("Contain = %v, want a contained fault", err)
	}
	if err := Contain("a plain error", func() error { return os.ErrClosed }); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Contain passed %v, want its function's error", err)
	}
}

// TestAllocateAhead allocates the blocks past the written part of a sparse
// log, as Badger leaves its memtable logs.
func TestAllocateAhead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "00001.mem")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(8 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	blocks := func() int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	before := blocks()
	if err := AllocateAhead(dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	if after := blocks(); after < before+1<<20 {
		t.Skipf("the filesystem did not allocate (%d → %d bytes); fallocate or SEEK_HOLE unsupported here", before, after)
	}
}
