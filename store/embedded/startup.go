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
			if s.replayScanned { // the next checkpoint is due: the next start replays the change keys
				s.dirty.Store(int64(max(n, minCheckpoint, idx.live/50)))
			}
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
// one when there is none, and whether the bulk marker (bulkKey) is set.
func (s *Store) identity() error {
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(bulkKey))
		if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		s.marked = err == nil
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
// vector was written at a later version, and returns how many there
// were. Those are named by the change keys above that version (see
// records.go): only they are iterated and the records and vectors they
// name read, so a start after a crash costs what changed since the
// snapshot, not the store's size. When the bulk marker is set (a large
// bulk wrote without change keys, and its end's snapshot was not
// written), or Badger holds a write above every change key (a build that
// keeps none wrote after the snapshot), every record and vector above
// covers is found by a scan of the tables that hold such versions
// instead.
func (s *Store) replay(x *index, covers uint64) (int, error) {
	r := replayer{s: s, x: x, vecs: map[string][]float32{}}
	err := s.db.View(func(txn *badger.Txn) error {
		r.txn = txn
		exps, vecs, complete, err := changed(txn, covers, s.db.MaxVersion())
		if err != nil {
			return err
		}
		if s.marked || !complete {
			why := "written by a build that keeps no change keys"
			if s.marked {
				why = "stopped during a bulk import"
			}
			s.log.Info("experience store " + why + "; replaying from its tables")
			s.replayScanned = true
			return r.scan(covers)
		}
		for _, k := range vecs {
			ns, id, _ := strings.Cut(k, "\x00")
			v, err := readVec(txn, ns, id, nil)
			if err != nil {
				return err
			}
			r.vecs[k] = v
		}
		for _, k := range exps {
			ns, id, _ := strings.Cut(k, "\x00")
			e, err := readExp(txn, ns, id)
			if err != nil {
				return err
			}
			if err := r.apply(k, e); err != nil {
				return err
			}
		}
		return r.rest()
	})
	if err != nil {
		return 0, fmt.Errorf("replay experience writes since the index snapshot: %w", err)
	}
	return r.n, nil
}

// changed returns the keys (key's form) whose record or vector a change
// key above version covers names, and whether those stand for every
// write above it: Badger's newest version (maxVersion) is a change key's,
// a deletion of one, the generation's or the bulk marker's.
func changed(txn *badger.Txn, covers, maxVersion uint64) (exps, vecs []string, complete bool, err error) {
	top := covers
	collect := func(prefix string, out *[]string) error {
		return latest(txn, prefix, covers, func(k string, item *badger.Item) error {
			top = max(top, item.Version())
			if !item.IsDeletedOrExpired() { // else deleted by a checkpoint that covered it
				*out = append(*out, k)
			}
			return nil
		})
	}
	if err := collect(prefixChgVec, &vecs); err != nil {
		return nil, nil, false, err
	}
	if err := collect(prefixChgExp, &exps); err != nil {
		return nil, nil, false, err
	}
	if it, err := txn.Get([]byte(genKey)); err == nil {
		top = max(top, it.Version())
	}
	err = latest(txn, bulkKey, covers, func(_ string, item *badger.Item) error {
		top = max(top, item.Version()) // set or deleted
		return nil
	})
	if err != nil {
		return nil, nil, false, err
	}
	return exps, vecs, maxVersion <= top, nil
}

// replayer applies the writes replay finds to x.
type replayer struct {
	s    *Store
	x    *index
	txn  *badger.Txn
	vecs map[string][]float32 // changed vectors (nil: none stored), by key
	n    int
}

// apply brings the slot of k up to date with its record e (nil: gone).
// A write that changed none of what a slot indexes (a counted hit, a
// forget) updates the slot in place; any other indexes the experience
// again, and one whose record is gone leaves x.
func (r *replayer) apply(k string, e *hindsight.Experience) error {
	r.n++
	v, vecChanged := r.vecs[k]
	delete(r.vecs, k)
	x := r.x
	slot, ok := x.byKey[k]
	if e == nil {
		if ok {
			x.kill(slot)
			delete(x.byKey, k)
		}
		return nil
	}
	mine := e.Embedder == r.s.embID
	if ok && !vecChanged && x.docs[slot].sum == textSum(e) && x.docs[slot].hasVec == mine {
		x.replaceMeta(slot, e)
		return nil
	}
	if mine && !vecChanged {
		var err error
		if v, err = readVec(r.txn, e.Namespace, e.ID, nil); err != nil {
			return err
		}
	}
	e.Vector = v
	x.add(e, r.s.embID, nil)
	return nil
}

// rest applies the vectors written without their record.
func (r *replayer) rest() error {
	for _, k := range slices.Sorted(maps.Keys(r.vecs)) {
		ns, id, _ := strings.Cut(k, "\x00")
		e, err := readExp(r.txn, ns, id)
		if err != nil {
			return err
		}
		if err := r.apply(k, e); err != nil {
			return err
		}
	}
	return nil
}

// scan applies every record and vector Badger holds above version
// covers, found in the tables that hold such versions, in key order,
// every version visited so that a deletion is seen too.
func (r *replayer) scan(covers uint64) error {
	err := latest(r.txn, prefixVec, covers, func(k string, item *badger.Item) error {
		if item.IsDeletedOrExpired() {
			r.vecs[k] = nil
			return nil
		}
		return item.Value(func(v []byte) error { r.vecs[k] = decodeVec(v, nil); return nil })
	})
	if err != nil {
		return err
	}
	err = latest(r.txn, prefixExp, covers, func(k string, item *badger.Item) error {
		if item.IsDeletedOrExpired() {
			return r.apply(k, nil)
		}
		e := new(hindsight.Experience)
		if err := item.Value(func(v []byte) error { return json.Unmarshal(v, e) }); err != nil {
			return fmt.Errorf("decode %q: %w", item.Key(), err)
		}
		return r.apply(k, e)
	})
	if err != nil {
		return err
	}
	return r.rest()
}

// dropChanges deletes the change keys written at or below version
// covers, which the snapshot on disk covers, in parts of dropPart keys:
// each part is read and deleted holding s.mu for writing, so that no
// write sets a change key between its read and its deletion, and
// searches and writes go on between parts.
func (s *Store) dropChanges(covers uint64) error {
	for _, prefix := range []string{prefixChgExp, prefixChgVec} {
		from := []byte(prefix)
		for from != nil {
			var err error
			if from, err = s.dropChangesPart([]byte(prefix), from, covers); err != nil {
				return fmt.Errorf("delete covered change keys: %w", err)
			}
		}
	}
	return nil
}

// dropPart is how many change keys dropChanges reads and deletes at once.
const dropPart = 4096

// dropChangesPart deletes the change keys under prefix from key from on
// that are at or below version covers, up to dropPart of them, and
// returns the key to go on from (nil: the prefix is done).
func (s *Store) dropChangesPart(prefix, from []byte, covers uint64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	var next []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		n := 0
		for it.Seek(from); it.Valid(); it.Next() {
			if n == dropPart {
				next = it.Item().KeyCopy(nil)
				return nil
			}
			n++
			if it.Item().Version() > covers {
				continue
			}
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	return next, err
}

// latest calls f, in key order, with the newest version of each key
// under prefix written above version since (without the prefix).
func latest(txn *badger.Txn, prefix string, since uint64, f func(k string, item *badger.Item) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), SinceTs: since, AllVersions: true})
	defer it.Close()
	last, seen := "", false
	for it.Rewind(); it.Valid(); it.Next() {
		k := string(it.Item().Key()[len(prefix):])
		if seen && k == last {
			continue // an older version
		}
		last, seen = k, true
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
