package embedded

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
)

// open loads the index from the snapshot, when one matches the
// database, and replays the writes Badger holds above the version it
// covers; otherwise (or when the replay fails) it rebuilds the index from
// Badger.
func (s *Store) open() error {
	t0 := time.Now()
	if err := s.identity(); err != nil {
		return fmt.Errorf("open experience store: %w", err)
	}
	idx, covers, err := s.loadSnapshot()
	if err == nil {
		var n int
		if n, err = s.replay(idx, covers); err == nil {
			s.idx, s.fromSnapshot = idx, true
			s.covers.Store(covers)
			s.dirty.Store(int64(n))
			s.log.Info("experience index loaded from its snapshot", "experiences", idx.live, "replayed", n,
				"took", time.Since(t0).Round(time.Millisecond))
			if n := s.needsReembed(); n > 0 {
				s.log.Warn("experiences need re-embedding for the configured embedder; until then they are found by text only",
					"count", n, "embedder", s.embID)
			}
			return nil
		}
		if uerr := unmapRegion(idx.region); uerr != nil {
			s.log.Warn("unmap experience index snapshot", "err", uerr)
		}
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNoSnapshot) {
		s.log.Warn("experience index snapshot not used; rebuilding the index from the database", "err", err)
	}
	if err := s.load(); err != nil {
		return err
	}
	s.log.Info("experience index rebuilt from the database", "experiences", s.idx.live, "took", time.Since(t0).Round(time.Millisecond))
	// Nothing on disk covers the rebuilt index: the next checkpoint
	// writes one.
	s.dirty.Store(int64(max(s.idx.live, 1)))
	return nil
}

// errNoSnapshot means the store keeps no snapshot (an in-memory
// database).
var errNoSnapshot = errors.New("no index snapshot")

// identity reads the database's generation (genKey), recording a fresh
// one when there is none.
func (s *Store) identity() error {
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(genKey))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		s.gen, err = it.ValueCopy(nil)
		return err
	})
	if err != nil || len(s.gen) == 16 {
		return err
	}
	s.gen = make([]byte, 16)
	rand.Read(s.gen)
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(genKey), s.gen) }); err != nil {
		return fmt.Errorf("record index generation: %w", err)
	}
	return nil
}

func (s *Store) loadSnapshot() (*index, uint64, error) {
	if s.snapPath == "" {
		return nil, 0, errNoSnapshot
	}
	x, covers, err := readSnapshot(s.snapPath, s.gen, s.embID, s.emb.Dim())
	if err != nil {
		return nil, 0, err
	}
	// A database restored from a copy older than the snapshot.
	if max := s.db.MaxVersion(); covers > max {
		unmapRegion(x.region)
		return nil, 0, fmt.Errorf("index snapshot is newer than the database (version %d, database at %d)", covers, max)
	}
	return x, covers, nil
}

// replay brings x, loaded from a snapshot that covers Badger's writes up
// to version covers, up to date with the experiences whose record or
// vector Badger holds at a later version, and returns how many there
// were. Only the tables with such versions are read, in key order, every
// version visited so that a deletion is seen too. A write that changed
// none of what a slot indexes (a counted hit, a forget) updates the slot
// in place; any other indexes the experience again, and one whose record
// is gone leaves x.
func (s *Store) replay(x *index, covers uint64) (int, error) {
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		vecs := map[string][]float32{} // changed vectors (nil: deleted)
		err := latest(txn, prefixVec, covers, func(k string, item *badger.Item) error {
			if item.IsDeletedOrExpired() {
				vecs[k] = nil
				return nil
			}
			return item.Value(func(v []byte) error { vecs[k] = decodeVec(v, nil); return nil })
		})
		if err != nil {
			return err
		}
		apply := func(k string, e *hindsight.Experience) error {
			n++
			v, vecChanged := vecs[k]
			delete(vecs, k)
			slot, ok := x.byKey[k]
			if e == nil {
				if ok {
					x.kill(slot)
					delete(x.byKey, k)
				}
				return nil
			}
			mine := e.Embedder == s.embID
			if ok && !vecChanged && x.docs[slot].sum == textSum(e) && x.docs[slot].hasVec == mine {
				x.replaceMeta(slot, e)
				return nil
			}
			if mine && !vecChanged {
				var err error
				if v, err = readVec(txn, e.Namespace, e.ID, nil); err != nil {
					return err
				}
			}
			e.Vector = v
			x.add(e, s.embID, nil)
			return nil
		}
		err = latest(txn, prefixExp, covers, func(k string, item *badger.Item) error {
			if item.IsDeletedOrExpired() {
				return apply(k, nil)
			}
			e := new(hindsight.Experience)
			if err := item.Value(func(v []byte) error { return json.Unmarshal(v, e) }); err != nil {
				return fmt.Errorf("decode %q: %w", item.Key(), err)
			}
			return apply(k, e)
		})
		if err != nil {
			return err
		}
		rest := slices.Sorted(maps.Keys(vecs)) // vectors written without their record
		for _, k := range rest {
			ns, id, _ := strings.Cut(k, "\x00")
			e, err := readExp(txn, ns, id)
			if err != nil {
				return err
			}
			if err := apply(k, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("replay experience writes since the index snapshot: %w", err)
	}
	return n, nil
}

// latest calls f, in key order, with the newest version of each key
// under prefix written above version since (without the prefix).
func latest(txn *badger.Txn, prefix string, since uint64, f func(k string, item *badger.Item) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), SinceTs: since, AllVersions: true})
	defer it.Close()
	last := ""
	for it.Rewind(); it.Valid(); it.Next() {
		k := string(it.Item().Key()[len(prefix):])
		if k == last {
			continue // an older version
		}
		last = k
		if err := f(k, it.Item()); err != nil {
			return err
		}
	}
	return nil
}

// setIndex makes nx (never sharing the old index's mapped vectors) the
// store's index and unmaps the snapshot the old one's vectors pointed
// into, which no reader uses any more (or, while a checkpoint writes
// from it, once it is done): the caller holds s.mu for writing
// (or is opening or closing the store).
func (s *Store) setIndex(nx *index) {
	old := s.idx
	s.idx = nx
	if old != nil && old != nx && old.region != nil { // a new index never shares the region
		if s.snapReaders.Load() > 0 {
			s.unmapLater = append(s.unmapLater, old.region) // a checkpoint reads it
		} else if err := unmapRegion(old.region); err != nil {
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
