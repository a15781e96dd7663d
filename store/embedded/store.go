// Package embedded is Hindsight's default experience store: experiences
// persisted in Badger, searched through in-memory indexes.
//
// The indexes are BM25 over each experience's text (store.Text; tokenised
// with store/tokenize, so CJK text is searchable as character bigrams), a
// vector index, exact-match filter lists (namespace, server, tool, task
// type, error code) and the few fields ranking reads; the experiences
// themselves stay in Badger and are read for the results only. Queries
// filter first: the smallest filter list that covers the query is
// scanned. Vectors are held scaled to unit length and quantised to int8
// with a per-vector scale; they are compared exactly (cosine over the
// int8 vectors) when at most 4,096 experiences pass the filters; above
// that a ternary sign code of each vector (two bits a dimension, compared
// with popcount) picks the ~512 nearest for rescoring, in two passes: the
// positive bits alone (a binary code, streamed from a slab of their own)
// keep 1,024, whose full codes keep 512. Both result lists (100 each) and
// the query's error template are fused and weighted by store/rank, the
// vector arm weighed for the configured embedder (rank.VectorWeightFor).
//
// The indexes are written to a snapshot file beside Badger's (see
// snapshot.go and checkpoint.go) as writes accumulate and at Close; Open
// loads it, its vectors mapped rather than read, and replays the writes
// Badger holds above the version it covers, so that a start after a
// crash costs what changed since; without a usable snapshot it rebuilds
// the indexes from Badger.
//
// Vectors record the embedder that made them (store.EmbedderID). A vector
// of another embedder or dimension is refused by Put (store.ErrDimension);
// after the configured embedder changes, experiences embedded by the old one
// are found by BM25 only until Reembed has run.
package embedded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerdb"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
)

// ValueThreshold is the Badger value threshold of the store's database:
// records and vectors below it stay in the LSM tree, where Purge erases
// them at once (values in the newest value-log file would stay on disk
// until the file fills). Experiences and vectors are a few KB.
const ValueThreshold = 64 << 10

// Options configure a Store. The zero value is ready to use.
type Options struct {
	Rank   rank.Options
	Logger *slog.Logger // nil: slog.Default()
	// Now returns the current time (tests); nil means time.Now.
	Now func() time.Time
	// CheckpointInterval is how often the store checks whether a new
	// index snapshot is due (see checkpoint.go); 0 means
	// DefaultCheckpointInterval, negative never (Close still writes one
	// when due).
	CheckpointInterval time.Duration
}

// Store is the embedded experience store. It is safe for concurrent use.
type Store struct {
	db    *badger.DB
	ownDB bool
	// compactor compacts db when the store opened it without Badger's
	// own compactors (OpenDaemon); nil otherwise.
	compactor *badgerdb.Compactor
	opt       Options
	log       *slog.Logger

	// snapPath is the index snapshot's file ("" for an in-memory
	// database); see snapshot.go.
	snapPath string
	gen      []byte // the database's generation (genKey)
	// covers is the Badger version the snapshot on disk covers (0: no
	// snapshot serves); dirty counts the experiences written since.
	covers atomic.Uint64
	dirty  atomic.Int64
	bulk   atomic.Int32 // PutBatch calls and BeginBulk under way
	// snapMu orders checkpoints, purges and Close; it is taken before mu.
	snapMu         sync.Mutex
	stop, loopDone chan struct{} // checkpointLoop's

	mu    sync.RWMutex
	emb   hindsight.Embedder
	embID string
	idx   *index
	// fromSnapshot tells whether open loaded the index from a snapshot;
	// replayScanned, whether its replay had to scan the tables (writes
	// without change keys).
	fromSnapshot, replayScanned bool
	// unmarked: the bulk under way writes no change keys (putChunk);
	// marked: bulkKey is in Badger; markGen counts its writes, so that a
	// checkpoint deletes only the marker its snapshot covers.
	unmarked, marked bool
	markGen          uint64
	// closed is set by Close, which writes the snapshot once.
	closed bool
	// snapReaders counts checkpoints writing vectors from the index's
	// chunks; unmapLater are the mappings setIndex left to the last of
	// them (guarded by mu).
	snapReaders atomic.Int32
	unmapLater  [][]byte
}

var _ hindsight.ExperienceStore = (*Store)(nil)
var _ store.Reembedder = (*Store)(nil)

// Open opens (creating it if needed) a Badger database in dir and loads the
// experiences it holds. Close closes the database.
func Open(dir string, emb hindsight.Embedder, opt Options) (*Store, error) {
	// Sized for the store's reads: the index (from the snapshot, or one
	// scan at a rebuild) answers queries, so Badger is read only for the
	// few experiences a query returns and for the record a write
	// replaces. An 8 MB block cache holds the hot ones; table indexes and
	// Bloom filters (about 1 MB at 100,000 experiences) stay in memory
	// (index cache 0); two 8 MB memtables take a write transaction of up
	// to 1.2 MB (Badger's 15%), far above a re-embedding batch.
	bo := badger.DefaultOptions(dir).
		WithLogger(badgerdb.NewLogger(logger(opt))).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(0).
		WithValueThreshold(ValueThreshold)
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("open experience store: %w", err)
	}
	s, err := openOn(db, emb, opt)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownDB = true
	return s, nil
}

// openOn returns a store over an open Badger database (Open's or
// OpenDaemon's); the store's keys start with "exp/", "vec/" and "expidx/",
// and its index snapshot lies in the database's directory. A write by
// another user after the store's Close makes the next open rebuild the
// index (see snapshot.go). Close leaves db open unless ownDB is set.
func openOn(db *badger.DB, emb hindsight.Embedder, opt Options) (*Store, error) {
	if emb == nil || emb.Dim() <= 0 {
		return nil, errors.New("open experience store: an embedder with a positive dimension is required")
	}
	s := &Store{db: db, opt: opt, log: logger(opt), emb: emb, embID: store.EmbedderID(emb)}
	if o := db.Opts(); !o.InMemory {
		s.snapPath = filepath.Join(o.Dir, snapshotName)
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	s.startCheckpoints()
	return s, nil
}

func logger(opt Options) *slog.Logger {
	if opt.Logger != nil {
		return opt.Logger
	}
	return slog.Default()
}

func (s *Store) now() time.Time {
	if s.opt.Now != nil {
		return s.opt.Now()
	}
	return time.Now()
}

// NeedsReembed returns how many experiences have no vector from the
// configured embedder.
func (s *Store) NeedsReembed() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.needsReembed()
}

func (s *Store) needsReembed() int {
	n := 0
	for i := range s.idx.docs {
		if d := &s.idx.docs[i]; d.live && !d.hasVec {
			n++
		}
	}
	return n
}

// Embedder returns the store's embedder.
func (s *Store) Embedder() hindsight.Embedder {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.emb
}

// Len returns the number of experiences held (every state, every namespace).
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.idx.live
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Get returns the experience id of namespace (with its vector, scaled to
// unit length), in any state.
func (s *Store) Get(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	ns := rank.Namespace(namespace)
	s.mu.RLock()
	defer s.mu.RUnlock()
	slot, ok := s.idx.get(ns, id)
	if !ok {
		return nil, fmt.Errorf("get experience %q: %w", id, hindsight.ErrNotFound)
	}
	var e *hindsight.Experience
	err := s.db.View(func(txn *badger.Txn) (err error) {
		if e, err = readExp(txn, ns, id); err != nil || e == nil {
			return err
		}
		if s.idx.docs[slot].hasVec {
			e.Vector, err = s.unitVec(txn, ns, id, nil)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get experience %q: %w", id, err)
	}
	if e == nil {
		return nil, fmt.Errorf("get experience %q: %w", id, hindsight.ErrNotFound)
	}
	return e, nil
}

// Count returns how many experiences the store holds, in every
// namespace, and how many of them are deleted, and superseded but not
// deleted, from its index: no record is read.
func (s *Store) Count() (total, deleted, superseded int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i := range s.idx.docs {
		d := &s.idx.docs[i]
		if !d.live {
			continue
		}
		total++
		switch {
		case d.deleted:
			deleted++
		case d.superseded:
			superseded++
		}
	}
	return total, deleted, superseded
}

// List returns experiences in creation order (then id); an ended ctx
// stops it.
func (s *Store) List(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := s.idx
	var out []hindsight.Experience
	err := s.db.View(func(txn *badger.Txn) error {
		for i := range x.docs {
			if i%4096 == 0 && ctx.Err() != nil { // it holds the read lock: writers wait
				return ctx.Err()
			}
			d := &x.docs[i]
			switch {
			case !d.live,
				opt.Namespace != "" && x.names[d.ns] != opt.Namespace,
				opt.Server != "" && x.names[d.server] != opt.Server,
				opt.Tool != "" && x.names[d.tool] != opt.Tool,
				d.superseded && !opt.IncludeSuperseded,
				d.deleted && !opt.IncludeDeleted:
				continue
			}
			e, err := readExp(txn, x.names[d.ns], d.id)
			if err != nil {
				return err
			}
			if e != nil {
				out = append(out, *e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list experiences: %w", err)
	}
	return store.ListOrder(out, opt.Limit), nil
}

// Search returns the experiences that best match q (see store/rank), and
// records them as hit unless q.NoHit.
func (s *Store) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	s.mu.RLock()
	emb := s.emb
	s.mu.RUnlock()
	var qv []float32
	if strings.TrimSpace(q.Text) != "" {
		vs, err := emb.Embed(ctx, []string{q.Text})
		if err != nil {
			return nil, fmt.Errorf("search experiences: embed query: %w", err)
		}
		qv = slices.Clone(vs[0])
		normalize(qv)
	}
	res, err := s.search(&q, qv, useAll)
	if err != nil {
		return nil, fmt.Errorf("search experiences: %w", err)
	}
	if !q.NoHit && len(res) > 0 {
		ids := make([]string, len(res))
		for i := range res {
			ids[i] = res[i].ID
		}
		if err := s.RecordHits(ctx, q.Namespace, ids, s.now()); err != nil {
			s.log.Warn("record experience hits", "err", err)
		}
	}
	return res, nil
}

// Arms of the fusion in search (all in production; fewer to measure them).
const (
	useBM25 = 1 << iota
	useVector
	useTemplate // the query's error template as a signal
	useAll      = useBM25 | useVector | useTemplate
)

func (s *Store) search(q *hindsight.Query, qv []float32, use int) ([]hindsight.ScoredExperience, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := s.idx
	now := s.now()
	f := x.compile(q, s.opt.Rank, now)
	if f.empty() {
		return nil, nil
	}
	sc := getScratch()
	defer putScratch(sc)
	ok := x.allow(sc, &f, x.candidates(&f))
	if len(ok) == 0 {
		return nil, nil
	}
	var exact map[int32][]float32 // vectors exactHead read
	var vec, lex []scored
	if strings.TrimSpace(q.Text) == "" {
		// No text: the newest matches, ranked by creation.
		newest := slices.Clone(ok)
		slices.SortFunc(newest, func(a, b int32) int { return x.docs[b].created.Compare(x.docs[a].created) })
		for _, slot := range newest[:min(len(newest), rank.Candidates)] {
			lex = append(lex, scored{slot: slot})
		}
	} else {
		if use&useVector != 0 {
			vec = x.knn(sc, qv, ok, rank.Candidates)
			var err error
			if exact, err = s.exactHead(sc, qv, vec); err != nil {
				return nil, err
			}
		}
		if use&useBM25 != 0 {
			lex = x.bm25(sc, q.Text, rank.Candidates)
		}
	}
	list := x.candidateList(sc, vec, lex)
	opt := s.opt.Rank.ForEmbedder(s.emb.Name())
	if use&useTemplate == 0 {
		opt.TemplateWeight = -1
	}
	res := opt.Fuse(q, list, now)
	if err := s.fill(res, exact); err != nil {
		return nil, err
	}
	return res, nil
}

// fill replaces the ranking view of each result with the stored
// experience and its vector (scaled to unit length), taken from known
// when exactHead read it. The caller holds s.mu.
func (s *Store) fill(res []hindsight.ScoredExperience, known map[int32][]float32) error {
	err := s.db.View(func(txn *badger.Txn) error {
		for i := range res {
			r := &res[i]
			e, err := readExp(txn, r.Namespace, r.ID)
			if err != nil {
				return err
			}
			if e == nil {
				return fmt.Errorf("experience %q is indexed but not stored", r.ID)
			}
			if slot, ok := s.idx.get(r.Namespace, r.ID); ok && s.idx.docs[slot].hasVec {
				if e.Vector = slices.Clone(known[slot]); e.Vector == nil {
					if e.Vector, err = s.unitVec(txn, r.Namespace, r.ID, nil); err != nil {
						return err
					}
				}
			}
			r.Experience = *e
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	return nil
}

// RecordHits adds one hit at at to each experience of ids in namespace and
// sets its last hit time (bringing a cold experience back into the hot
// index). Unknown ids are ignored.
func (s *Store) RecordHits(ctx context.Context, namespace string, ids []string, at time.Time) error {
	ns := rank.Namespace(namespace)
	s.mu.Lock()
	defer s.mu.Unlock()
	var changed []*hindsight.Experience
	var slots []int32
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, id := range ids {
			slot, ok := s.idx.get(ns, id)
			if !ok {
				continue
			}
			n, err := readExp(txn, ns, id)
			if err != nil || n == nil {
				return err
			}
			n.HitCount++
			t := at.UTC()
			if n.LastHitAt == nil || t.After(*n.LastHitAt) {
				n.LastHitAt = &t
			}
			b, err := json.Marshal(n)
			if err != nil {
				return err
			}
			if err := setRecord(txn, ns, id, b); err != nil {
				return err
			}
			changed = append(changed, n)
			slots = append(slots, slot)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record experience hits: %w", err)
	}
	for i, e := range changed {
		s.idx.replaceMeta(slots[i], e)
	}
	s.dirty.Add(int64(len(changed)))
	return nil
}

// Close stops the background checkpoints, writes the index snapshot when
// none serves or the bulk marker is set (see checkpoint.go; otherwise
// the next Open replays the writes since the last one, fewer than a
// checkpoint's worth, so that a stop costs no snapshot), and closes the
// database if the store opened it. A snapshot that cannot be written is logged: the next Open
// replays more, or rebuilds.
func (s *Store) Close() error {
	s.stopCheckpoints()
	s.snapMu.Lock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.snapMu.Unlock()
		return nil
	}
	// A snapshot when none serves, or when the bulk marker would make
	// the next start scan (it covers every write: none follows).
	if s.snapPath != "" && ((s.covers.Load() == 0 && s.dirty.Load() > 0) || s.marked) {
		covers := s.readTs()
		err := writeSnapshot(s.snapPath, s.idx.compact(true), s.gen, covers, s.embID)
		if err == nil && s.marked {
			err = s.unmark()
		}
		if err != nil {
			s.log.Warn("experience index snapshot not written; the next start replays more, or rebuilds", "err", err)
		}
	}
	s.closed = true
	s.mu.Unlock()
	s.snapMu.Unlock()
	s.setIndex(newIndex(s.idx.dim)) // unmaps the snapshot; later searches find nothing
	if !s.ownDB {
		return nil
	}
	if s.compactor != nil {
		s.compactor.Stop()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close experience store: %w", err)
	}
	return nil
}
