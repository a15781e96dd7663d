package embedded

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/internal/erase"
)

// OpenDaemon opens (creating it if needed) the store in dir as the daemon
// keeps it: a Badger database of its own with the daemon's options
// (badgerdb.Options: synchronous writes, memory-sized, no compactors of
// Badger's own) and ValueThreshold, so that experiences (records and
// vectors) stay in the LSM tree, where a purge can erase them: Badger never
// rewrites the value-log file it appends to. It first erases what purges
// left in the value-log file the last run appended to
// (erase.CollectValueLog; a failure is logged), and compacts the database
// with a badgerdb.Compactor, started once the index has loaded (a flatten
// beside the load, on the daemon's one processor, would slow the first
// answer). Close stops the compactor and closes the database.
// levelZeroStall is the level-0 tables at which Badger stalls writes to
// the daemon's experience database: room for a held compactor.
const levelZeroStall = 16

func OpenDaemon(dir string, emb hindsight.Embedder, opt Options) (*Store, error) {
	log := logger(opt)
	db, err := badger.Open(badgerdb.Options(dir, log).WithValueThreshold(ValueThreshold).
		WithNumLevelZeroTablesStall(levelZeroStall))
	if err != nil {
		return nil, fmt.Errorf("open experience store: %w", err)
	}
	if err := erase.CollectValueLog(db); err != nil {
		log.Warn("collect the experience store's value log", "err", err)
	}
	s, err := openOn(db, emb, opt)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownDB, s.compactor = true, badgerdb.StartCompactor(db, log)
	return s, nil
}
