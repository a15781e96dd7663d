package daemon

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
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
		WithLogger(badgerLogger{logger}).
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
