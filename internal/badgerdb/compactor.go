package badgerdb

import (
	"log/slog"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// compactCheck is how often a Compactor looks at its database's level 0.
const compactCheck = 5 * time.Second

// Compactor compacts a Badger database opened without compactors of its
// own (NumCompactors 0, as Options opens them; Badger's wake every 50 ms
// each, busy or not). It looks every 5 s at how many tables level 0 holds
// and, past NumLevelZeroTables, flattens the tree (badger.DB.Flatten),
// which merges level 0 into the level below it and that into the next, so
// the tree keeps one level besides level 0; an idle database has nothing
// to merge. Writes stall at NumLevelZeroTablesStall tables, which 5 s of
// the daemon's ingest do not reach: its values live in the value log and
// its tables hold keys and pointers.
type Compactor struct {
	db     *badger.DB
	logger *slog.Logger
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// StartCompactor starts compacting db in the background until Stop. It
// does nothing for a database that runs Badger's own compactors.
func StartCompactor(db *badger.DB, logger *slog.Logger) *Compactor {
	c := &Compactor{db: db, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	if db.Opts().NumCompactors > 0 {
		close(c.done)
		return c
	}
	go c.loop()
	return c
}

func (c *Compactor) loop() {
	defer close(c.done)
	t := time.NewTicker(compactCheck)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if err := c.compact(); err != nil {
			c.logger.Warn("compact database", "dir", c.db.Opts().Dir, "err", err)
		}
	}
}

// compact flattens the tree when level 0 has more than
// NumLevelZeroTables tables (Flatten would leave fewer where they are).
func (c *Compactor) compact() error {
	levels := c.db.Levels()
	if len(levels) == 0 || levels[0].NumTables <= c.db.Opts().NumLevelZeroTables {
		return nil
	}
	return c.db.Flatten(1)
}

// Stop ends the compactor, waiting for a compaction under way: call it
// before closing the database.
func (c *Compactor) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
