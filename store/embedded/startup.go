package embedded

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/dgraph-io/badger/v4"
)

// open loads the index from the snapshot when one matches Badger's data,
// and rebuilds it from Badger otherwise. Either way the snapshot is
// removed and Badger's generation replaced, so that no snapshot matches
// while the store is open: one is written again by Close.
func (s *Store) open() error {
	idx, err := s.loadSnapshot()
	switch {
	case err == nil:
		s.idx, s.fromSnapshot = idx, true
		if n := s.needsReembed(); n > 0 {
			s.log.Warn("experiences need re-embedding for the configured embedder; until then they are found by text only",
				"count", n, "embedder", s.embID)
		}
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoSnapshot):
		if err := s.load(); err != nil {
			return err
		}
	default:
		s.log.Warn("experience index snapshot not used; rebuilding the index from the database", "err", err)
		if err := s.load(); err != nil {
			return err
		}
	}
	if s.snapPath != "" {
		if err := os.Remove(s.snapPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("open experience store: remove index snapshot: %w", err)
		}
	}
	if err := s.setGeneration(nil); err != nil {
		return fmt.Errorf("open experience store: %w", err)
	}
	return nil
}

// errNoSnapshot means the store keeps no snapshot (an in-memory
// database) or Badger records none.
var errNoSnapshot = errors.New("no index snapshot")

func (s *Store) loadSnapshot() (*index, error) {
	if s.snapPath == "" {
		return nil, errNoSnapshot
	}
	var gen []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(genKey))
		if err != nil {
			return err
		}
		gen, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) || (err == nil && len(gen) == 0) {
		return nil, errNoSnapshot
	}
	if err != nil {
		return nil, err
	}
	return readSnapshot(s.snapPath, gen, s.embID, s.emb.Dim())
}

// setGeneration records gen in Badger; nil records a fresh random one,
// which no snapshot matches.
func (s *Store) setGeneration(gen []byte) error {
	if gen == nil {
		gen = newGeneration()
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(genKey), gen) }); err != nil {
		return fmt.Errorf("record index generation: %w", err)
	}
	return nil
}

func newGeneration() []byte {
	g := make([]byte, 16)
	rand.Read(g)
	return g
}

// saveSnapshot writes the index to the snapshot file and then records its
// generation in Badger. A crash between the two leaves a snapshot that
// does not match, which the next open ignores.
func (s *Store) saveSnapshot() error {
	if s.snapPath == "" {
		return nil
	}
	gen := newGeneration()
	if err := writeSnapshot(s.snapPath, s.idx, gen, s.embID); err != nil {
		return err
	}
	return s.setGeneration(gen)
}

// setIndex makes nx the store's index and unmaps the snapshot the old
// one's vectors pointed into, which no reader uses any more: the caller
// holds s.mu for writing (or is opening or closing the store).
func (s *Store) setIndex(nx *index) {
	old := s.idx
	s.idx = nx
	if old != nil && old.region != nil && (nx == nil || &nx.region[0] != &old.region[0]) {
		if err := unmapRegion(old.region); err != nil {
			s.log.Warn("unmap experience index snapshot", "err", err)
		}
		old.region = nil
	}
}
