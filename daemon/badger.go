package daemon

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// badgerOptions are the daemon's Badger settings: small memtables and caches
// (the daemon shares a laptop with the agent), synchronous writes (a batch
// acknowledged to a sidecar's outbox must survive a crash), and logs into
// slog instead of stderr.
func badgerOptions(dir string, logger *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(badgerLogger{logger}).
		WithSyncWrites(true).
		WithMemTableSize(16 << 20).   // a transaction holds up to 15% of it
		WithValueThreshold(16 << 10). // large steps go to the value log, so a batch fits a transaction
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(8 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2)
}

// badgerLogger routes Badger's log lines to slog. Badger is chatty at info
// level; those lines go to debug.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (b badgerLogger) Infof(f string, a ...any) {
	b.l.Debug("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (b badgerLogger) Debugf(f string, a ...any) {
	b.l.Debug("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
