package badgerdb

import (
	"log/slog"

	"github.com/dgraph-io/badger/v4"
)

// Options returns the settings for every Badger database the daemon
// opens (traces with the reflection queue, the embedded experience store),
// and logs into logger instead of stderr. Writes are synchronous: what the
// daemon acknowledged survives a crash.
//
// Memory is sized on purpose, for a daemon that idles beside the agent
// and must stay small (about 100 MB resident) whatever it stored. Badger's
// defaults hold 64 MB memtables, a 256 MB block cache and 40 compactor
// wake-ups a second:
//   - memtables of 8 MB, two at most (one filling, one being flushed): a
//     memtable is an arena of its full size on the Go heap, about 10 MB
//     with Badger's batch allowance. A batch transaction may hold 15% of
//     it (1.2 MB): step bodies go to the value log, so a batch holds
//     keys and pointers;
//   - an 8 MB block cache (compressed tables need one) and no index
//     cache: table indexes stay in memory, which for the daemon's small
//     trees (keys and pointers) is less than a cache, and one goroutine
//     fewer;
//   - no compactors of Badger's own: a Compactor, which sleeps while
//     nothing is written, keeps the tree in shape (an idle daemon then
//     costs next to no CPU).
func Options(dir string, logger *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(NewLogger(logger)).
		WithSyncWrites(true).
		WithMemTableSize(8 << 20).    // a transaction holds up to 15% of it
		WithValueThreshold(16 << 10). // large steps go to the value log, so a batch fits a transaction
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(0).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(0) // see Compactor
}
