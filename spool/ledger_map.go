//go:build linux

package spool

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps the ledger's file shared, so that a count is an atomic add
// on the page cache's copy of it.
func (l *ledger) mapFile() error {
	mem, err := unix.Mmap(int(l.f.Fd()), 0, ledgerSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map outbox ledger: %w", err)
	}
	l.mem = mem
	return nil
}

// addMapped adds n to the counter at off of a mapping (8-byte aligned: a
// mapping starts on a page).
func addMapped(mem []byte, off int, n uint64) {
	atomic.AddUint64((*uint64)(unsafe.Pointer(&mem[off])), n)
}

// loadMapped reads the counter at off of a mapping.
func loadMapped(mem []byte, off int) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&mem[off])))
}
