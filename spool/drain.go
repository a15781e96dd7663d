package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
	"github.com/hindsight-proxy/hindsight/internal/losses"
)

// importJournal writes the steps of a dead sidecar's journal to its
// outbox's database (a step already there is written again, the same).
func importJournal(db *badger.DB, steps []entry) error {
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for _, e := range steps {
		if err := wb.Set(stepKey(prefixStep, e.seq), e.raw); err != nil {
			return fmt.Errorf("import journal: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("import journal: %w", err)
	}
	return nil
}

// DrainOrphans delivers the outboxes left behind by sidecars that died
// (their lock is free), in order, and removes each one it empties. Live
// sidecars' outboxes are left alone. An outbox that cannot be opened is
// moved aside to Outboxes()/.corrupt/ and logged. It returns how many
// steps it delivered; it stops at the first delivery error (the daemon is
// unreachable) and leaves the rest for a later call.
func DrainOrphans(ctx context.Context, home hindsight.Home, d Deliverer, opts DrainOptions) (int, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return drainOrphans(ctx, home, d, opts, &counters{})
}

// DrainOptions configure DrainOrphans.
type DrainOptions struct {
	Logger *slog.Logger // nil: slog.Default()
	// DeadSpill, when set, removes what a dead sidecar left in its spill
	// directory (see Spool.SpillDir), before its steps are delivered, and
	// returns how many exchanges were lost with it.
	DeadSpill func(dir string, log *slog.Logger) int64
	// DiskReserve is the free space a drain keeps on the outboxes'
	// filesystem: without it, it writes nothing to their databases. 0:
	// diskspace.DefaultSidecarReserve, at most a quarter of the
	// filesystem; negative: no check.
	DiskReserve int64
}

func drainOrphans(ctx context.Context, home hindsight.Home, d Deliverer, opts DrainOptions, c *counters) (int, error) {
	root := home.Outboxes()
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list outboxes: %w", err)
	}
	total := 0
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		n, err := drainOne(ctx, home, filepath.Join(root, e.Name()), e.Name(), d, opts, c)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func drainOne(ctx context.Context, home hindsight.Home, dir, id string, d Deliverer, opts DrainOptions, c *counters) (int, error) {
	lock, err := lockFile(filepath.Join(dir, lockName))
	if errors.Is(err, errLocked) || errors.Is(err, fs.ErrNotExist) {
		return 0, nil // a live sidecar, or another drainer just removed it
	}
	if err != nil {
		return 0, fmt.Errorf("lock outbox %s: %w", id, err)
	}
	defer lock.Close()
	log := opts.Logger.With("outbox", id)
	// First: status shows a locked outbox's ledger no more (see List).
	countUnsettled(home, dir, id, log)
	// Draining writes to the dead sidecar's database (its journal, the
	// removal of delivered steps), through mapped files.
	if err := diskspace.Check(dir, diskspace.ReserveFor(dir, opts.DiskReserve, diskspace.DefaultSidecarReserve), 0); err != nil {
		return 0, fmt.Errorf("drain outbox %s: %w", id, err)
	}
	if opts.DeadSpill != nil {
		if n := opts.DeadSpill(filepath.Join(dir, spillName), log); n > 0 {
			if err := losses.AddTo(string(home), id, "", losses.Crash, n, "spilled before redaction by a sidecar that died"); err != nil {
				log.Warn("record lost steps", "err", err)
			}
		}
	}
	rejected0, expired0 := c.rejected.Load(), c.expired.Load()
	defer func() {
		if n := c.rejected.Load() - rejected0; n > 0 {
			_ = losses.AddTo(string(home), id, "", losses.Rejected, n, "refused by the daemon while draining a dead sidecar's outbox")
		}
		if n := c.expired.Load() - expired0; n > 0 {
			_ = losses.AddTo(string(home), id, "", losses.Expired, n, "undelivered past the retention period")
		}
	}()
	journaled, segments, torn := scanJournal(dir, log)
	if torn > 0 {
		if err := losses.AddTo(string(home), id, "", losses.Crash, int64(torn), "a step torn in the journal by a sidecar killed as it recorded it (its answer was never sent)"); err != nil {
			log.Warn("record lost steps", "err", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, dbName)); errors.Is(err, os.ErrNotExist) && len(journaled) == 0 {
		if err := deliverEnds(ctx, dir, id, d); err != nil {
			return 0, fmt.Errorf("drain outbox %s: %w", id, err)
		}
		losses.Remove(string(home), id) // a ledger that records nothing
		return 0, os.RemoveAll(dir)     // the sidecar died before writing anything
	}
	db, err := openDBContained(filepath.Join(dir, dbName), log)
	if err != nil && diskspace.IsNoSpace(err) {
		return 0, fmt.Errorf("drain outbox %s: %w", id, err)
	}
	if err != nil {
		c.corrupt.Add(1)
		moveAside(dir, id, err, log)
		return 0, nil
	}
	if len(journaled) > 0 {
		// What the sidecar held only in memory: some of it was delivered
		// already, which the daemon will notice.
		if err := importJournal(db, journaled); err != nil {
			db.Close()
			return 0, fmt.Errorf("drain outbox %s: %w", id, err)
		}
		for _, p := range segments {
			_ = os.Remove(p)
		}
	}
	o := &Spool{id: id, dir: dir, log: log, c: c, opts: Options{Deliverer: d, BatchSize: DefaultBatchSize, Retention: DefaultRetention}}
	o.initStore()
	o.db.Store(db)
	o.diskOnly = countKeys(db, prefixStep)
	o.c.depth.Add(int64(o.diskOnly))
	o.enforceRetention()
	return o.drainTo(ctx, home, db)
}

// drainTo delivers what db, the database of a dead sidecar's spool o,
// holds until it is empty or delivery fails, then closes it and, when it
// was emptied, exports the refused steps and removes the outbox.
func (o *Spool) drainTo(ctx context.Context, home hindsight.Home, db *badger.DB) (int, error) {
	delivered := 0
	for ctx.Err() == nil {
		batch := o.nextBatch(DefaultBatchSize)
		if len(batch) == 0 {
			break
		}
		before := o.c.delivered.Load()
		err := o.deliver(ctx, batch)
		delivered += int(o.c.delivered.Load() - before)
		if err != nil {
			db.Close()
			return delivered, fmt.Errorf("drain outbox %s: %w", o.id, err)
		}
	}
	empty := countKeys(db, prefixStep) == 0
	var exportErr error
	if empty {
		exportErr = o.exportRejected()
	}
	if empty && exportErr == nil {
		// The sidecar's ends, after its steps.
		exportErr = deliverEnds(ctx, o.dir, o.id, o.opts.Deliverer)
	}
	if err := db.Close(); err != nil {
		return delivered, fmt.Errorf("close outbox %s: %w", o.id, err)
	}
	if exportErr != nil {
		return delivered, exportErr
	}
	if empty {
		if err := os.RemoveAll(o.dir); err != nil {
			return delivered, fmt.Errorf("remove outbox %s: %w", o.id, err)
		}
		o.log.Info("drained orphaned outbox", "steps", delivered)
		losses.Remove(string(home), o.id) // a ledger that records nothing
	}
	return delivered, ctx.Err()
}

// moveAside moves the outbox dir (id), whose database would not open
// (err), to .corrupt/ beside it, and logs it.
func moveAside(dir, id string, err error, log *slog.Logger) {
	aside := filepath.Join(filepath.Dir(dir), corruptDir, id+"-"+strconv.FormatInt(time.Now().Unix(), 10))
	_ = os.MkdirAll(filepath.Dir(aside), 0o700)
	if rerr := os.Rename(dir, aside); rerr != nil {
		log.Error("corrupt outbox could not be moved aside", "err", err, "move_err", rerr)
	} else {
		log.Error("corrupt outbox moved aside", "err", err, "to", aside)
	}
}

// countUnsettled counts in the loss record of the dead sidecar id (losses
// "crash") what the ledger of its outbox dir owes and has not settled:
// answered exchanges that were still in its capture queue, or only in its
// memory, when it died. The ledger is removed once counted, so a drain
// that stops half way does not count them twice.
func countUnsettled(home hindsight.Home, dir, id string, log *slog.Logger) {
	n, err := LedgerUnsettled(dir)
	if err != nil {
		log.Warn("outbox ledger unreadable; exchanges its sidecar left to capture's queue are not counted", "err", err)
	}
	if n > 0 {
		if err := losses.AddTo(string(home), id, "", losses.Crash, n,
			"answered exchanges only in the capture queue or in memory when the sidecar died"); err != nil {
			log.Warn("record lost steps", "err", err)
			return // the ledger stays, for the next drain
		}
		log.Error("a sidecar died with answered exchanges not yet safe on disk; counted lost", "steps", n)
	}
	_ = os.Remove(filepath.Join(dir, ledgerName))
}
