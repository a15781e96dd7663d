package badgerdb

import (
	"log/slog"
	"sync"
	"sync/atomic"
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
	held   atomic.Int32 // Hold calls not yet released
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

// compact flattens the tree when level 0 has more tables than
// flattenAt allows (Flatten would leave fewer where they are), then
// pages the tables out of the process's resident set (PageOutTables).
func (c *Compactor) compact() error {
	levels := c.db.Levels()
	if len(levels) == 0 || levels[0].NumTables <= flattenAt(c.db.Opts(), c.Held()) {
		return nil
	}
	if err := c.db.Flatten(1); err != nil {
		return err
	}
	_, err := PageOutTables(c.db.Opts().Dir)
	return err
}

// flattenAt is the most tables level 0 keeps before a flatten:
// NumLevelZeroTables, or while held two below NumLevelZeroTablesStall
// (where writes would wait), if that is more.
func flattenAt(o badger.Options, held bool) int {
	if held {
		return max(o.NumLevelZeroTables, o.NumLevelZeroTablesStall-2)
	}
	return o.NumLevelZeroTables
}

// Hold lets level 0 grow to just below the stall before a flatten
// (flattenAt) until release is called (once; holds nest). Each flatten
// rewrites the tables that new keys fall between, which for random keys
// is most of the tree: a bulk write under a hold merges it a few times
// instead of every few memtables. The next check after the last release
// flattens what level 0 then holds.
func (c *Compactor) Hold() (release func()) {
	c.held.Add(1)
	var once sync.Once
	return func() { once.Do(func() { c.held.Add(-1) }) }
}

// Stop ends the compactor, waiting for a compaction under way: call it
// before closing the database.
func (c *Compactor) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// Held reports whether a Hold is in force.
func (c *Compactor) Held() bool { return c.held.Load() > 0 }
