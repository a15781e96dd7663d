package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hindsight-proxy/hindsight/internal/diskspace"
)

// ErrDiskFull marks a batch of steps the daemon refused because its disk
// is short of space (status 507): the sidecar keeps the steps and delivers
// them again once there is room.
var ErrDiskFull = errors.New("the daemon's disk is short of space")

// A SpaceGuard keeps the daemon's Badger databases (every directory under
// Dir) from writing through mapped files the filesystem cannot back, which
// would kill the daemon (SIGBUS; see package diskspace). Check refuses a
// write while the filesystem has less than Reserve free (as statfs said at
// most spaceFresh before, less what was checked since), and allocates the
// blocks of each database's memtable and value logs ahead of their write
// position; Run checks every second and, while the daemon is at work (a
// request in the last minute, see Touch) or the disk is short, allocates
// ahead too, so the daemon's own small writes (task finality, reflection,
// experiences) land on allocated blocks between ingests. An idle daemon
// skips the allocation, which opens and lists every database's logs.
// The guard remembers where each log's data ended (diskspace.Allocator):
// an allocation looks for the write position from there, not through the
// whole log.
type SpaceGuard struct {
	Dir     string // the daemon's data directory
	Reserve int64  // free space to keep; 0: DefaultDaemonReserve fitted to the filesystem; negative: no check
	Logger  *slog.Logger

	low     atomic.Bool
	refused atomic.Int64
	since   atomic.Int64 // bytes checked since the logs were last allocated ahead
	touched atomic.Int64 // unix nanoseconds of the latest Touch

	mu    sync.Mutex          // held while allocating ahead
	ahead diskspace.Allocator // remembers where each database's logs were written up to

	fmu    sync.Mutex                  // guards the free space known
	free   int64                       // the filesystem's free space when last asked
	freeAt time.Time                   // when; zero: unknown
	spent  int64                       // the bytes checked since
	statfs func(string) (int64, error) // diskspace.Free, unless a test's

	fit        sync.Once // fitFS: the filesystem's size read
	fitReserve int64     // DefaultDaemonReserve, fitted to the filesystem
	fitAhead   int64     // spaceAhead, fitted to the filesystem
}

// spaceBusy is how long after a Touch Run keeps allocating ahead.
const spaceBusy = time.Minute

// Touch says the daemon is at work: a request came in.
func (g *SpaceGuard) Touch() {
	if g != nil {
		g.touched.Store(time.Now().UnixNano())
	}
}

// spaceAhead is how much of each database's logs the guard keeps allocated
// ahead of the write position, beyond the write at hand (less on a small
// filesystem: see diskspace.FitAhead).
const spaceAhead = 4 << 20

// fitFS reads the filesystem's size once and fits the default reserve and
// spaceAhead to it.
func (g *SpaceGuard) fitFS() {
	g.fit.Do(func() {
		g.fitReserve, g.fitAhead = diskspace.DefaultDaemonReserve, spaceAhead
		if size, err := diskspace.Size(g.Dir); err == nil {
			g.fitReserve = diskspace.FitReserve(g.fitReserve, size)
			g.fitAhead = diskspace.FitAhead(g.fitAhead, size)
		}
	})
}

// aheadBy is spaceAhead fitted to the filesystem.
func (g *SpaceGuard) aheadBy() int64 {
	g.fitFS()
	return g.fitAhead
}

// reserve is Reserve when set (none when negative), else
// diskspace.DefaultDaemonReserve fitted to the filesystem's size (see
// diskspace.FitReserve).
func (g *SpaceGuard) reserve() int64 {
	g.fitFS()
	if g.Reserve != 0 {
		return max(g.Reserve, 0)
	}
	return g.fitReserve
}

// Check returns nil when need bytes may be written, else an error wrapping
// ErrDiskFull and diskspace.ErrLow. It allocates the logs ahead again once
// half of what was allocated may have been written.
func (g *SpaceGuard) Check(need int64) error {
	return g.check(need, false)
}

func (g *SpaceGuard) check(need int64, force bool) error {
	if g == nil {
		return nil
	}
	reserve := g.reserve()
	if reserve == 0 {
		return nil
	}
	err := g.checkFree(reserve, need, force)
	if err == nil && (g.since.Add(need) > g.aheadBy()/2 || force) {
		err = g.allocateAhead(need, force)
	}
	g.note(err)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return nil
}

// spaceFresh is how long the guard counts on the free space it was told.
const spaceFresh = 50 * time.Millisecond

// checkFree is diskspace.Check, asking the filesystem (statfs) on a forced
// check, while the disk is short, every spaceFresh and every spaceAhead/2
// bytes checked; in between the free space is the last answer less the
// bytes checked since.
func (g *SpaceGuard) checkFree(reserve, need int64, force bool) error {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	if force || g.low.Load() || g.freeAt.IsZero() || time.Since(g.freeAt) > spaceFresh || g.spent+need > g.aheadBy()/2 {
		statfs := g.statfs
		if statfs == nil {
			statfs = diskspace.Free
		}
		free, err := statfs(g.Dir)
		if err != nil {
			g.freeAt = time.Time{}
			return nil // as diskspace.Check: the write reports its own error
		}
		g.free, g.freeAt, g.spent = free, time.Now(), 0
	}
	if err := diskspace.CheckFree(g.Dir, g.free-g.spent, reserve, need); err != nil {
		return err
	}
	g.spent += need
	return nil
}

// Low reports whether the last check found the disk short of space.
func (g *SpaceGuard) Low() bool { return g != nil && g.low.Load() }

// Refused counts the step batches refused for lack of space.
func (g *SpaceGuard) Refused() int64 {
	if g == nil {
		return 0
	}
	return g.refused.Load()
}

// allocateAhead allocates the logs of every database need bytes and
// spaceAhead ahead, unless forced or another check did since need was
// counted: checks that find the logs due together allocate them once, the
// others waiting for it.
func (g *SpaceGuard) allocateAhead(need int64, force bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	since := g.since.Load()
	if !force && since <= g.aheadBy()/2 {
		return nil
	}
	if err := g.allocate(need + g.aheadBy()); err != nil {
		return err
	}
	g.since.Add(-since)
	return nil
}

func (g *SpaceGuard) allocate(ahead int64) error {
	ents, err := os.ReadDir(g.Dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := g.ahead.Ahead(filepath.Join(g.Dir, e.Name()), ahead); err != nil {
				return err
			}
		}
	}
	return nil
}

func (g *SpaceGuard) note(err error) {
	log := g.Logger
	if log == nil {
		log = slog.Default()
	}
	was := g.low.Swap(err != nil)
	switch {
	case err != nil && !was:
		log.Error("disk short of space: refusing steps (sidecars hold them) until space returns", "err", err)
	case err == nil && was:
		log.Info("disk has room again: taking steps")
	}
}

// Run checks the disk every second until ctx is done (see SpaceGuard).
func (g *SpaceGuard) Run(ctx context.Context) {
	if g == nil || g.reserve() == 0 {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for first := true; ; first = false {
		busy := time.Since(time.Unix(0, g.touched.Load())) < spaceBusy
		_ = g.check(0, first || busy || g.low.Load())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
