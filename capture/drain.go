package capture

import (
	"context"
	"log/slog"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/spool"
)

// DrainOrphans delivers the outboxes left behind by sidecars that died (see
// spool.DrainOrphans) and deletes the exchanges each one had spilled,
// unread: their key died with their sidecar (counted in SpillLost and the
// ledger). It returns how many steps it delivered. diskReserve is the
// free space it keeps on the outboxes' filesystem (see
// spool.DrainOptions.DiskReserve; 0: the default).
func DrainOrphans(ctx context.Context, home hindsight.Home, d spool.Deliverer, diskReserve int64) (int, error) {
	return drainOrphans(ctx, home, d, slog.Default(), diskReserve)
}

func drainOrphans(ctx context.Context, home hindsight.Home, d spool.Deliverer, log *slog.Logger, diskReserve int64) (int, error) {
	return spool.DrainOrphans(ctx, home, d, spool.DrainOptions{Logger: log, DeadSpill: removeDeadSpill, DiskReserve: diskReserve})
}
