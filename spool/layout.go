package spool

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
)

// The layout of the outbox root (Home.Outboxes()): one directory per
// spool, named by its id, holding
//
//	sidecar.lock          locked by the live sidecar (see lockFile)
//	journal-<seq>.bin     the journal's segments (see journal), named after
//	                      their first step, or journal-ahead-<n>.bin when
//	                      made ahead (see preparer)
//	ledger.bin            answered exchanges owed and settled (see ledger)
//	db/                   the Badger database, when one was opened
//	db.corrupt-<time>     a database that did not open, moved aside
//	stats.json            the sidecar's last report (see WriteStats)
//	ends.jsonl            ends the daemon was not told (see Spool.NoteEnd)
//	spill/                the Recorder's sealed exchanges (see SpillDir)
//
// and, beside them, .<id>.new while a spool is being created, .corrupt/
// for outboxes that could not be opened, and .rejected/<id>.jsonl for the
// steps the daemon refused.
const (
	lockName    = "sidecar.lock"
	dbName      = "db"
	statsName   = "stats.json"
	spillName   = "spill"
	corruptDir  = ".corrupt"
	rejectedDir = ".rejected"
	asideMark   = ".corrupt-" // NAME.corrupt-TIME: a database moved aside
)

// Key prefixes in an outbox's Badger database.
const (
	prefixStep     = 's' // s + seq (big endian): a step to deliver
	prefixRejected = 'r' // r + seq: a step the daemon refused
)

// newID returns a fresh outbox id: time-ordered, unique per process.
func newID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", time.Now().UTC().Format("20060102T150405.000000"), os.Getpid(), hex.EncodeToString(b[:]))
}

func stepKey(prefix byte, seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

func countKeys(db *badger.DB, prefix byte) int {
	n := 0
	_ = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefix}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	return n
}

// create makes the directory of a new spool under home, locked: it is
// built and locked under a hidden name, then renamed, so DrainOrphans
// never sees an outbox without its lock.
func create(home hindsight.Home, id string) (dir string, lock *os.File, err error) {
	root := home.Outboxes()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", nil, fmt.Errorf("create outbox directory: %w", err)
	}
	tmp := filepath.Join(root, "."+id+".new")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return "", nil, fmt.Errorf("create outbox: %w", err)
	}
	lock, err = lockFile(filepath.Join(tmp, lockName))
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("lock outbox: %w", err)
	}
	dir = filepath.Join(root, id)
	if err := os.Rename(tmp, dir); err != nil {
		lock.Close()
		os.RemoveAll(tmp)
		return "", nil, fmt.Errorf("create outbox: %w", err)
	}
	return dir, lock, nil
}

// RejectedPath is the file where the steps the daemon refused from the
// spool id are kept once its outbox is removed (see exportRejected).
func RejectedPath(home hindsight.Home, id string) string {
	return filepath.Join(home.Outboxes(), rejectedDir, id+".jsonl")
}

// RemoveSetAside removes, under home's outbox root, what spools set aside
// before cutoff: the entries of .rejected/ and .corrupt/, and databases
// moved aside inside outboxes. It returns how many it removed.
func RemoveSetAside(home hindsight.Home, cutoff time.Time) int {
	root := home.Outboxes()
	n := 0
	old := func(p string) bool {
		fi, err := os.Lstat(p)
		return err == nil && fi.ModTime().Before(cutoff)
	}
	for _, dir := range []string{rejectedDir, corruptDir} {
		entries, _ := os.ReadDir(filepath.Join(root, dir))
		for _, e := range entries {
			p := filepath.Join(root, dir, e.Name())
			if old(p) && os.RemoveAll(p) == nil {
				n++
			}
		}
	}
	outboxes, _ := os.ReadDir(root)
	for _, o := range outboxes {
		if !o.IsDir() || strings.HasPrefix(o.Name(), ".") {
			continue
		}
		entries, _ := os.ReadDir(filepath.Join(root, o.Name()))
		for _, e := range entries {
			p := filepath.Join(root, o.Name(), e.Name())
			if strings.Contains(e.Name(), asideMark) && old(p) && os.RemoveAll(p) == nil {
				n++
			}
		}
	}
	return n
}
