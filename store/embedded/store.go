// Package embedded is Hindsight's default experience store: experiences
// persisted in Badger, searched through in-memory indexes rebuilt at open.
//
// The indexes are BM25 over each experience's text (store.Text; tokenised
// with store/tokenize, so CJK text is searchable as character bigrams), a
// vector index, and exact-match filter lists (namespace, server, tool, task
// type, error code). Queries filter first: the smallest filter list that
// covers the query is scanned. Vectors are compared exactly (cosine over
// unit-length float32) when at most 4,096 experiences pass the filters;
// above that a ternary sign code of each vector (two bits a dimension,
// compared with popcount) picks the ~512 nearest for exact rescoring, in two
// passes: the positive bits alone (a binary code, streamed from a slab of
// their own) keep 1,024, whose full codes keep 512. Both result lists (100
// each) and the query's error template are fused and weighted by
// store/rank, the vector arm weighed for the configured embedder
// (rank.VectorWeightFor).
//
// Vectors record the embedder that made them (store.EmbedderID). A vector
// of another embedder or dimension is refused by Put (store.ErrDimension);
// after the configured embedder changes, experiences embedded by the old one
// are found by BM25 only until Reembed has run.
package embedded

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/badgerlog"
	"github.com/hindsight-proxy/hindsight/store"
	"github.com/hindsight-proxy/hindsight/store/rank"
)

// Key prefixes in Badger. Experiences are JSON (the export format, without
// the vector); vectors are little-endian float32.
const (
	prefixExp = "exp/"
	prefixVec = "vec/"
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
}

// Store is the embedded experience store. It is safe for concurrent use.
type Store struct {
	db    *badger.DB
	ownDB bool
	opt   Options
	log   *slog.Logger

	mu    sync.RWMutex
	emb   hindsight.Embedder
	embID string
	idx   *index
}

var _ hindsight.ExperienceStore = (*Store)(nil)
var _ store.Reembedder = (*Store)(nil)

// Open opens (creating it if needed) a Badger database in dir and loads the
// experiences it holds. Close closes the database.
func Open(dir string, emb hindsight.Embedder, opt Options) (*Store, error) {
	bo := badger.DefaultOptions(dir).
		WithLogger(badgerlog.New(logger(opt))).
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueThreshold(ValueThreshold)
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("open experience store: %w", err)
	}
	s, err := New(db, emb, opt)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownDB = true
	return s, nil
}

// New returns a store over an open Badger database shared with other users
// (the daemon keeps traces in the same database); its keys start with
// "exp/" and "vec/". Close leaves db open.
func New(db *badger.DB, emb hindsight.Embedder, opt Options) (*Store, error) {
	if emb == nil || emb.Dim() <= 0 {
		return nil, errors.New("open experience store: an embedder with a positive dimension is required")
	}
	s := &Store{db: db, opt: opt, log: logger(opt), emb: emb, embID: store.EmbedderID(emb)}
	if err := s.load(); err != nil {
		return nil, err
	}
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
				if err := vit.Item().Value(func(v []byte) error { e.Vector = decodeVec(v); return nil }); err != nil {
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

func expKey(ns, id string) []byte { return []byte(prefixExp + key(ns, id)) }
func vecKey(ns, id string) []byte { return []byte(prefixVec + key(ns, id)) }

func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeVec(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// NeedsReembed returns how many experiences have no vector from the
// configured embedder.
func (s *Store) NeedsReembed() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
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

// Put inserts or updates e (see hindsight.ExperienceStore). A missing id is
// generated; an empty namespace is the default one. When e has no vector it
// is embedded, unless its text is unchanged and the stored vector is still
// current. A vector of another embedder or dimension is refused with
// store.ErrDimension.
func (s *Store) Put(ctx context.Context, e *hindsight.Experience) error {
	if e.Namespace == "" {
		e.Namespace = hindsight.DefaultNamespace
	}
	if e.ID == "" {
		e.ID = newID()
	}
	if err := store.Validate(e); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	s.mu.RLock()
	emb, embID := s.emb, s.embID
	var reuse []float32
	if slot, ok := s.idx.get(e.Namespace, e.ID); ok && len(e.Vector) == 0 {
		if d := &s.idx.docs[slot]; d.hasVec && store.Text(d.exp) == store.Text(e) {
			reuse = s.idx.vector(slot)
		}
	}
	s.mu.RUnlock()

	vec := e.Vector
	switch {
	case len(vec) > 0:
		if (e.Embedder != "" && e.Embedder != embID) || len(vec) != emb.Dim() {
			return fmt.Errorf("put experience %q: vector of %q with %d dimensions, store uses %s: %w",
				e.ID, e.Embedder, len(vec), embID, store.ErrDimension)
		}
	case reuse != nil:
		vec = reuse
	default:
		vs, err := emb.Embed(ctx, []string{store.Text(e)})
		if err != nil {
			return fmt.Errorf("put experience %q: embed: %w", e.ID, err)
		}
		if len(vs) != 1 || len(vs[0]) != emb.Dim() {
			return fmt.Errorf("put experience %q: embedder returned a bad vector: %w", e.ID, store.ErrDimension)
		}
		vec = vs[0]
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.embID != embID {
		return fmt.Errorf("put experience %q: embedder changed during put: %w", e.ID, store.ErrDimension)
	}
	now := s.now().UTC()
	n := cloneExp(e)
	n.Vector, n.Embedder = vec, embID
	slot, exists := s.idx.get(e.Namespace, e.ID)
	if exists {
		old := s.idx.docs[slot].exp
		if old.Version != e.Version {
			return fmt.Errorf("put experience %q: stored version %d, given %d: %w", e.ID, old.Version, e.Version, hindsight.ErrConflict)
		}
		if n.CreatedAt.IsZero() {
			n.CreatedAt = old.CreatedAt
		}
	} else if n.CreatedAt.IsZero() {
		n.CreatedAt = now
	}
	n.Version = e.Version + 1
	n.UpdatedAt = now
	if err := s.write(n); err != nil {
		return fmt.Errorf("put experience %q: %w", e.ID, err)
	}
	e.Version, e.CreatedAt, e.UpdatedAt, e.Embedder = n.Version, n.CreatedAt, n.UpdatedAt, n.Embedder
	e.Vector = slices.Clone(vec)
	if exists && sameIndexed(s.idx.docs[slot].exp, n) && s.idx.docs[slot].hasVec {
		if !slices.Equal(vec, reuse) {
			s.idx.setVector(slot, vec)
		}
		s.idx.replaceMeta(slot, n)
	} else {
		s.idx.add(n, s.embID, nil)
	}
	if s.idx.needsCompact() {
		s.idx = s.idx.compact(s.embID)
	}
	return nil
}

// sameIndexed reports whether a and b have the same text and filter fields.
func sameIndexed(a, b *hindsight.Experience) bool {
	return a.Namespace == b.Namespace && a.Server == b.Server && a.Tool == b.Tool &&
		a.TaskType == b.TaskType && a.ErrorCode == b.ErrorCode && store.Text(a) == store.Text(b)
}

func cloneExp(e *hindsight.Experience) *hindsight.Experience {
	n := *e
	n.SourceSteps = slices.Clone(e.SourceSteps)
	if e.LastHitAt != nil {
		t := *e.LastHitAt
		n.LastHitAt = &t
	}
	n.Vector = nil
	return &n
}

// write persists e and its vector in one transaction.
func (s *Store) write(e *hindsight.Experience) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(expKey(e.Namespace, e.ID), b); err != nil {
			return err
		}
		if len(e.Vector) > 0 {
			return txn.Set(vecKey(e.Namespace, e.ID), encodeVec(e.Vector))
		}
		return nil
	})
}

// Get returns the experience id of namespace (with its vector, scaled to
// unit length), in any state.
func (s *Store) Get(ctx context.Context, namespace, id string) (*hindsight.Experience, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	slot, ok := s.idx.get(rank.Namespace(namespace), id)
	if !ok {
		return nil, fmt.Errorf("get experience %q: %w", id, hindsight.ErrNotFound)
	}
	e := cloneExp(s.idx.docs[slot].exp)
	e.Vector = s.idx.vector(slot)
	return e, nil
}

// List returns experiences in creation order (then id).
func (s *Store) List(ctx context.Context, opt hindsight.ListOptions) ([]hindsight.Experience, error) {
	s.mu.RLock()
	var out []hindsight.Experience
	for i := range s.idx.docs {
		d := &s.idx.docs[i]
		if !d.live {
			continue
		}
		e := d.exp
		switch {
		case opt.Namespace != "" && e.Namespace != opt.Namespace,
			opt.Server != "" && e.Server != opt.Server,
			opt.Tool != "" && e.Tool != opt.Tool,
			e.SupersededBy != "" && !opt.IncludeSuperseded,
			e.Deleted && !opt.IncludeDeleted:
			continue
		}
		out = append(out, *cloneExp(e))
	}
	s.mu.RUnlock()
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
	res := s.search(&q, qv, useAll)
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

func (s *Store) search(q *hindsight.Query, qv []float32, use int) []hindsight.ScoredExperience {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x := s.idx
	now := s.now()
	f := x.compile(q, s.opt.Rank, now)
	if f.empty() {
		return nil
	}
	sc := getScratch()
	defer putScratch(sc)
	ok := x.allow(sc, &f, x.candidates(&f))
	if len(ok) == 0 {
		return nil
	}
	cands := map[int32]*rank.Candidate{}
	if strings.TrimSpace(q.Text) == "" {
		// No text: the newest matches, ranked by creation.
		newest := slices.Clone(ok)
		slices.SortFunc(newest, func(a, b int32) int { return x.docs[b].exp.CreatedAt.Compare(x.docs[a].exp.CreatedAt) })
		for i, slot := range newest[:min(len(newest), rank.Candidates)] {
			cands[slot] = &rank.Candidate{Exp: x.docs[slot].exp, BM25Rank: i + 1}
		}
	} else {
		var vec, lex []scored
		if use&useVector != 0 {
			vec = x.knn(sc, qv, ok, rank.Candidates)
		}
		if use&useBM25 != 0 {
			lex = x.bm25(sc, q.Text, rank.Candidates)
		}
		for i, r := range vec {
			cands[r.slot] = &rank.Candidate{Exp: x.docs[r.slot].exp, VectorRank: i + 1}
		}
		for i, r := range lex {
			c := cands[r.slot]
			if c == nil {
				c = &rank.Candidate{Exp: x.docs[r.slot].exp}
				cands[r.slot] = c
			}
			c.BM25Rank = i + 1
		}
	}
	list := make([]rank.Candidate, 0, len(cands))
	for _, c := range cands {
		if c.BM25Rank > 0 || c.VectorRank > 0 {
			list = append(list, *c)
		}
	}
	opt := s.opt.Rank.ForEmbedder(s.emb.Name())
	if use&useTemplate == 0 {
		opt.TemplateWeight = -1
	}
	res := opt.Fuse(q, list, now)
	for i := range res {
		slot, _ := x.get(res[i].Namespace, res[i].ID)
		res[i].Experience = *cloneExp(&res[i].Experience)
		res[i].Vector = x.vector(slot)
	}
	return res
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
	for _, id := range ids {
		slot, ok := s.idx.get(ns, id)
		if !ok {
			continue
		}
		n := cloneExp(s.idx.docs[slot].exp)
		n.HitCount++
		t := at.UTC()
		if n.LastHitAt == nil || t.After(*n.LastHitAt) {
			n.LastHitAt = &t
		}
		changed = append(changed, n)
		slots = append(slots, slot)
	}
	if len(changed) == 0 {
		return nil
	}
	err := s.db.Update(func(txn *badger.Txn) error {
		for _, e := range changed {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := txn.Set(expKey(e.Namespace, e.ID), b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record experience hits: %w", err)
	}
	for i, e := range changed {
		s.idx.replaceMeta(slots[i], e)
	}
	return nil
}

// Reembed recomputes the vector of every experience with emb and makes emb
// the store's embedder. progress, if not nil, is called after each batch.
// Until it finishes, searches use the old vectors.
func (s *Store) Reembed(ctx context.Context, emb hindsight.Embedder, progress func(done, total int)) error {
	embID := store.EmbedderID(emb)
	s.mu.RLock()
	var all []*hindsight.Experience
	for i := range s.idx.docs {
		if d := &s.idx.docs[i]; d.live {
			all = append(all, cloneExp(d.exp))
		}
	}
	s.mu.RUnlock()
	const batch = 64
	for i := 0; i < len(all); i += batch {
		part := all[i:min(i+batch, len(all))]
		texts := make([]string, len(part))
		for j, e := range part {
			texts[j] = store.Text(e)
		}
		vs, err := emb.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("re-embed experiences: %w", err)
		}
		if len(vs) != len(part) {
			return fmt.Errorf("re-embed experiences: embedder returned %d vectors for %d texts", len(vs), len(part))
		}
		err = s.db.Update(func(txn *badger.Txn) error {
			for j, e := range part {
				if len(vs[j]) != emb.Dim() {
					return store.ErrDimension
				}
				e.Embedder, e.Vector = embID, vs[j]
				if err := txn.Set(vecKey(e.Namespace, e.ID), encodeVec(e.Vector)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("re-embed experiences: %w", err)
		}
		if progress != nil {
			progress(i+len(part), len(all))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Rewrite the records (embedder field) and swap in a fresh index built
	// from the current experiences and the new vectors. Experiences
	// changed meanwhile are re-embedded here.
	vecs := make(map[string][]float32, len(all))
	texts := make(map[string]string, len(all))
	for _, e := range all {
		vecs[key(e.Namespace, e.ID)] = e.Vector
		texts[key(e.Namespace, e.ID)] = store.Text(e)
	}
	nx := newIndex(emb.Dim())
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for i := range s.idx.docs {
		d := &s.idx.docs[i]
		if !d.live {
			continue
		}
		e := cloneExp(d.exp)
		v := vecs[key(e.Namespace, e.ID)]
		if v == nil || store.Text(e) != texts[key(e.Namespace, e.ID)] {
			vs, err := emb.Embed(ctx, []string{store.Text(e)})
			if err != nil {
				return fmt.Errorf("re-embed experiences: %w", err)
			}
			v = vs[0]
			if err := wb.Set(vecKey(e.Namespace, e.ID), encodeVec(v)); err != nil {
				return fmt.Errorf("re-embed experiences: %w", err)
			}
		}
		e.Embedder, e.Vector = embID, v
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("re-embed experiences: %w", err)
		}
		if err := wb.Set(expKey(e.Namespace, e.ID), b); err != nil {
			return fmt.Errorf("re-embed experiences: %w", err)
		}
		nx.add(e, embID, nil)
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("re-embed experiences: %w", err)
	}
	s.idx, s.emb, s.embID = nx, emb, embID
	return nil
}

// Close closes the database if the store opened it.
func (s *Store) Close() error {
	if !s.ownDB {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close experience store: %w", err)
	}
	return nil
}
