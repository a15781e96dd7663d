package embedded

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/internal/erase"
)

// The Compactor flattens the whole tree once level 0 holds more than
// levelZeroTables tables (while an import holds it, BeginBulk, half of
// levelZeroStall). Experiences keep their records and vectors in the
// tree, and new keys fall between the stored ones ("exp/…" and "vec/…"
// of each id), so each flatten rewrites nearly the whole database: the
// fewer the flattens, the less an import of many costs. Level-0 tables
// are files, not memory; a read looks into each (its Bloom filter
// first). Tables are 2 MB at every level (TableSizeMultiplier 1, not
// Badger's doubling per level): a compaction builds several at once, in
// memory.
const (
	levelZeroTables = 4
	levelZeroStall  = 24
)

// OpenDaemon opens (creating it if needed) the store in dir as the daemon
// keeps it: a Badger database of its own with the daemon's options
// (badgerdb.Options: synchronous writes, memory-sized, no compactors of
// Badger's own) and ValueThreshold, so that experiences (records and
// vectors) stay in the LSM tree, where a purge can erase them: Badger never
// rewrites the value-log file it appends to. It first erases what purges
// left in the value-log file the last run appended to
// (erase.CollectValueLog; a failure is logged), and compacts the database
// with a badgerdb.Compactor. Close stops the compactor and closes the
// database.
func OpenDaemon(dir string, emb hindsight.Embedder, opt Options) (*Store, error) {
	log := logger(opt)
	bo := badgerdb.Options(dir, log).WithValueThreshold(ValueThreshold).
		WithNumLevelZeroTables(levelZeroTables).WithNumLevelZeroTablesStall(levelZeroStall)
	bo.TableSizeMultiplier = 1
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("open experience store: %w", err)
	}
	if err := erase.CollectValueLog(db); err != nil {
		log.Warn("collect the experience store's value log", "err", err)
	}
	compactor := badgerdb.StartCompactor(db, log)
	s, err := New(db, emb, opt)
	if err != nil {
		compactor.Stop()
		db.Close()
		return nil, err
	}
	s.ownDB, s.compactor = true, compactor
	return s, nil
}
