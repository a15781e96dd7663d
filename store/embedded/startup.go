package embedded

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
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
	var version uint64
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(genKey))
		if err != nil {
			return err
		}
		version = it.Version()
		gen, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) || (err == nil && len(gen) == 0) {
		return nil, errNoSnapshot
	}
	if err != nil {
		return nil, err
	}
	// The generation is the database's last write when the store that
	// wrote the snapshot closed; a later write (by a Hindsight that
	// predates snapshots, say) leaves the generation in place, but not
	// the last version.
	if max := s.db.MaxVersion(); version != max {
		return nil, fmt.Errorf("index snapshot is stale: the database was written after it (version %d, then %d)", version, max)
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

// setIndex makes nx (never sharing the old index's mapped vectors) the
// store's index and unmaps the snapshot the old one's vectors pointed
// into, which no reader uses any more: the caller holds s.mu for writing
// (or is opening or closing the store).
func (s *Store) setIndex(nx *index) {
	old := s.idx
	s.idx = nx
	if old != nil && old != nx && old.region != nil { // a new index never shares the region
		if err := unmapRegion(old.region); err != nil {
			s.log.Warn("unmap experience index snapshot", "err", err)
		}
		old.region = nil
	}
}

// load rebuilds the indexes from Badger. Decoding (this goroutine) and
// indexing (another) overlap; vectors are read by a second iterator that
// walks the "vec/" keys in step with the "exp/" keys, which share their
// suffixes and so their order.
func (s *Store) load() error {
	idx := newIndex(s.emb.Dim())
	stale := 0
	batches := make(chan []*hindsight.Experience, 8)
	indexed := make(chan struct{})
	go func() {
		defer close(indexed)
		for batch := range batches {
			for _, e := range batch {
				if len(e.Vector) != idx.dim {
					stale++
				}
				idx.add(e, s.embID, nil)
			}
		}
	}()
	err := s.db.View(func(txn *badger.Txn) error {
		return s.decodeAll(txn, batches)
	})
	close(batches)
	<-indexed
	if err != nil {
		return fmt.Errorf("load experiences: %w", err)
	}
	if stale > 0 {
		s.log.Warn("experiences need re-embedding for the configured embedder; until then they are found by text only",
			"count", stale, "embedder", s.embID)
	}
	s.idx = idx
	return nil
}

// decodeAll sends every stored experience, with its vector when the
// configured embedder made it, to out in batches.
func (s *Store) decodeAll(txn *badger.Txn, out chan<- []*hindsight.Experience) error {
	const batchSize = 256
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: []byte(prefixExp)})
	defer it.Close()
	vit := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: []byte(prefixVec)})
	defer vit.Close()
	vit.Rewind()
	batch := make([]*hindsight.Experience, 0, batchSize)
	for it.Rewind(); it.Valid(); it.Next() {
		e := new(hindsight.Experience)
		if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, e) }); err != nil {
			return fmt.Errorf("decode %q: %w", it.Item().Key(), err)
		}
		if e.Embedder == s.embID {
			suffix := it.Item().Key()[len(prefixExp):]
			for vit.Valid() && bytes.Compare(vit.Item().Key()[len(prefixVec):], suffix) < 0 {
				vit.Next()
			}
			if vit.Valid() && bytes.Equal(vit.Item().Key()[len(prefixVec):], suffix) {
				if err := vit.Item().Value(func(v []byte) error { e.Vector = decodeVec(v, nil); return nil }); err != nil {
					return fmt.Errorf("decode vector %q: %w", vit.Item().Key(), err)
				}
			}
		}
		batch = append(batch, e)
		if len(batch) == batchSize {
			out <- batch
			batch = make([]*hindsight.Experience, 0, batchSize)
		}
	}
	if len(batch) > 0 {
		out <- batch
	}
	return nil
}
