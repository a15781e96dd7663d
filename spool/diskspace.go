package spool

import (
	"path/filepath"

	"github.com/hindsight-proxy/hindsight/internal/diskspace"
)

// Disk space: Badger writes through memory-mapped files, and a mapped
// write the filesystem cannot back kills the process (SIGBUS; see package
// diskspace). The outbox therefore never hands Badger a write, nor opens
// or closes its database, while its filesystem has less than its reserve
// free (Options.DiskReserve: 32 MiB by default, less on a small
// filesystem), and before each write it allocates the blocks
// of the database's memtable log ahead of Badger's write position
// (allocateAhead). The journal is written with write(2), which fails
// cleanly, or, on Linux, copied into segments whose blocks were written
// whole when they were created (so a copy never needs a block the disk
// lacks), but is skipped too while space is short, so that a full disk
// leaves it working once space returns.
//
// While space is short, steps are held in memory (up to MaxHeld steps and
// MaxHeldBytes), delivered from there when the daemon takes them, and
// written once space returns (persistLoop retries every second); past the
// bound the newest are dropped, counted (Counts.DroppedDiskFull, the
// ledger's "disk-full") and logged.

// DefaultMaxHeldBytes bounds the size of the steps held in memory while
// the outbox cannot be written.
const DefaultMaxHeldBytes = 32 << 20

// allocateAhead is how far past Badger's write position, beyond the
// write at hand, the outbox allocates its database's mapped logs (less on a
// small filesystem: see diskspace.FitAhead).
const allocateAhead = 1 << 20

// reserve is the free space the outbox keeps on its filesystem:
// Options.DiskReserve when set (none when negative), else
// diskspace.DefaultSidecarReserve fitted to the filesystem's size (see
// diskspace.FitReserve).
func (s *store) reserve() int64 {
	s.fitFS() // fits allocateAhead too
	if r := s.diskReserve.Load(); r != 0 {
		return max(r, 0)
	}
	return s.fitReserve
}

// fitFS reads the filesystem's size once and fits the default reserve and
// allocateAhead to it.
func (s *store) fitFS() {
	s.fit.Do(func() {
		s.fitReserve, s.fitAhead = diskspace.DefaultSidecarReserve, allocateAhead
		if size, err := diskspace.Size(s.dir); err == nil {
			s.fitReserve = diskspace.FitReserve(s.fitReserve, size)
			s.fitAhead = diskspace.FitAhead(s.fitAhead, size)
		}
	})
}

// checkSpace returns nil when need bytes may be written to the outbox's
// database: the filesystem keeps its reserve beyond them and, while the
// database is open, the blocks its logs will be written to are allocated
// (again once half of what was allocated ahead may have been written, and
// after the database is opened). Otherwise it returns an error wrapping
// diskspace.ErrLow.
func (s *store) checkSpace(need int64) error {
	reserve := s.reserve()
	if err := diskspace.Check(s.dir, reserve, need); err != nil {
		s.noteLow(err)
		return err
	}
	if reserve > 0 && s.db.Load() != nil && s.allocSince.Add(need) > s.fitAhead/2 {
		if err := s.alloc.Ahead(filepath.Join(s.dir, dbName), need+s.fitAhead); err != nil {
			s.noteLow(err)
			return err
		}
		s.allocSince.Store(0)
	}
	s.noteLow(nil)
	return nil
}

// noteLow logs when the disk becomes short of space and when it has room
// again.
func (s *store) noteLow(err error) {
	was := s.spaceLow.Swap(err != nil)
	switch {
	case err != nil && !was:
		s.log.Error("disk short of space: the outbox stops writing and holds steps in memory until space returns", "err", err,
			"max_held", s.opts.MaxHeld, "max_held_bytes", s.opts.MaxHeldBytes)
	case err == nil && was:
		s.log.Info("disk has room again: the outbox writes again")
	}
}
