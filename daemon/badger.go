package daemon

import (
	"log/slog"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight/internal/badgerlog"
)

// BadgerOptions returns the settings for every Badger database the daemon
// opens (traces, the reflection queue, the embedded experience store): small
// memtables and caches, since the daemon idles beside the agent on a laptop
// (Badger's defaults hold 64 MB memtables and a 256 MB block cache), and
// logs into logger instead of stderr. Writes are synchronous: what the
// daemon acknowledged survives a crash.
func BadgerOptions(dir string, logger *slog.Logger) badger.Options {
	return badgerOptions(dir, logger)
}

// badgerOptions are the daemon's Badger settings (see BadgerOptions).
func badgerOptions(dir string, logger *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(badgerlog.New(logger)).
		WithSyncWrites(true).
		WithMemTableSize(16 << 20).   // a transaction holds up to 15% of it
		WithValueThreshold(16 << 10). // large steps go to the value log, so a batch fits a transaction
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2)
}
