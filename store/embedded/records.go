package embedded

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
)

// Key prefixes in Badger. Experiences are JSON (the export format, without
// the vector); vectors are encodeVec's. Every transaction that writes an
// experience's record or vector also writes its change key (empty), so
// that a start replays the writes since the index snapshot from the
// change keys written after it, not from a scan of every record (see
// replay); a checkpoint deletes the change keys its snapshot covers. The
// exception is a large bulk (see putChunk): once a checkpoint is due, the
// rest of it writes no change keys, under a marker (bulkKey) that makes
// a replay scan, until the snapshot its end takes.
const (
	prefixExp    = "exp/"
	prefixVec    = "vec/"
	prefixChgExp = "chg/exp/"
	prefixChgVec = "chg/vec/"
)

func expKey(ns, id string) []byte    { return []byte(prefixExp + key(ns, id)) }
func vecKey(ns, id string) []byte    { return []byte(prefixVec + key(ns, id)) }
func chgExpKey(ns, id string) []byte { return []byte(prefixChgExp + key(ns, id)) }
func chgVecKey(ns, id string) []byte { return []byte(prefixChgVec + key(ns, id)) }

// setRecord sets the record (b) of id in ns and its change key in txn.
func setRecord(txn *badger.Txn, ns, id string, b []byte) error {
	if err := txn.Set(expKey(ns, id), b); err != nil {
		return err
	}
	return txn.Set(chgExpKey(ns, id), nil)
}

// setChanged sets both change keys of id in ns in txn.
func setChanged(txn *badger.Txn, ns, id string) error {
	if err := txn.Set(chgExpKey(ns, id), nil); err != nil {
		return err
	}
	return txn.Set(chgVecKey(ns, id), nil)
}

// setVector sets the vector (v, encodeVec's) of id in ns and its change
// key in txn.
func setVector(txn *badger.Txn, ns, id string, v []byte) error {
	if err := txn.Set(vecKey(ns, id), v); err != nil {
		return err
	}
	return txn.Set(chgVecKey(ns, id), nil)
}

// vecQ16 tags a vector stored as 16-bit integers: the tag, a float32
// scale (a power of two) and one little-endian int16 a dimension, so
// 2n+5 bytes, an odd length no float32 vector (4n bytes, the stores
// written before it) has.
const vecQ16 = 0x51

// encodeVec returns v as stored: 16-bit integers times a power-of-two
// scale, which keeps 15 to 16 significant bits of the largest component
// (a cosine moves by less than 1e-4) in half the bytes of float32, so
// that the store's tables, their compactions and the pages a search
// reads are smaller. A vector with a NaN or an infinity, or whose
// largest component is below 1e-30, is kept as float32. Encoding
// storedVec(v) gives encodeVec(v) again.
func encodeVec(v []float32) []byte {
	peak := float32(0)
	for _, f := range v {
		peak = max(peak, f, -f) // NaN if any is
	}
	if peak != peak || peak > math.MaxFloat32 || (peak > 0 && peak < 1e-30) {
		return encodeFloat32(v) // a NaN, an infinity, or a scale float32 cannot hold
	}
	b := make([]byte, 5+2*len(v))
	b[0] = vecQ16
	if peak == 0 {
		return b // scale 0, every component 0
	}
	_, exp := math.Frexp(float64(peak)) // peak = frac × 2^exp, frac in [0.5, 1)
	scale := float32(math.Ldexp(1, exp-15))
	inv := float32(math.Ldexp(1, 15-exp)) // exact: a power of two
	binary.LittleEndian.PutUint32(b[1:], math.Float32bits(scale))
	q := b[5:]
	for i, f := range v {
		n := min(max(round32(f*inv), -32767), 32767) // f*inv within ±32768
		binary.LittleEndian.PutUint16(q[2*i:], uint16(int16(n)))
	}
	return b
}

func encodeFloat32(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// decodeVec returns the vector b holds (in dst when it has room), either
// encoding; nil when b is neither.
func decodeVec(b []byte, dst []float32) []float32 {
	var n int
	switch {
	case len(b)%2 == 1 && b[0] == vecQ16 && len(b) >= 5:
		n = (len(b) - 5) / 2
	case len(b)%4 == 0:
		n = len(b) / 4
	default:
		return nil
	}
	v := dst[:0]
	if cap(v) < n {
		v = make([]float32, n)
	}
	v = v[:n]
	if len(b)%2 == 0 {
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v
	}
	scale := math.Float32frombits(binary.LittleEndian.Uint32(b[1:]))
	for i := range v {
		v[i] = float32(int16(binary.LittleEndian.Uint16(b[5+2*i:]))) * scale
	}
	return v
}

// storedVec returns v as decodeVec gives it back once stored, so that
// the index holds the vector a rebuild from the database would give.
func storedVec(v []float32) []float32 {
	if v == nil {
		return nil
	}
	v, _ = encodeStored(v)
	return v
}

// encodeStored returns storedVec(v) and the bytes that store it
// (encodeVec's), encoding v once; nil and nil for nil.
func encodeStored(v []float32) ([]float32, []byte) {
	if v == nil {
		return nil, nil
	}
	b := encodeVec(v)
	return decodeVec(b, nil), b
}

// write persists e and its vector, vec (encodeVec's; nil: none), in one
// transaction.
func (s *Store) write(e *hindsight.Experience, vec []byte) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error {
		if err := setRecord(txn, e.Namespace, e.ID, b); err != nil {
			return err
		}
		if len(e.Vector) > 0 {
			return setVector(txn, e.Namespace, e.ID, vec)
		}
		return nil
	})
}

// readExp returns the stored experience id of ns, or nil when there is
// none.
func readExp(txn *badger.Txn, ns, id string) (*hindsight.Experience, error) {
	it, err := txn.Get(expKey(ns, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read experience %q: %w", id, err)
	}
	e := new(hindsight.Experience)
	if err := it.Value(func(v []byte) error { return json.Unmarshal(v, e) }); err != nil {
		return nil, fmt.Errorf("decode experience %q: %w", id, err)
	}
	return e, nil
}

// readVec returns the stored vector of id in ns (in dst when it has room),
// or nil when there is none.
func readVec(txn *badger.Txn, ns, id string, dst []float32) ([]float32, error) {
	it, err := txn.Get(vecKey(ns, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read vector %q: %w", id, err)
	}
	var v []float32
	err = it.Value(func(b []byte) error { v = decodeVec(b, dst); return nil })
	return v, err
}

// unitVec returns the stored vector of id in ns scaled to unit length (in
// dst when it has room), or nil when there is none or it is not the
// configured embedder's.
func (s *Store) unitVec(txn *badger.Txn, ns, id string, dst []float32) ([]float32, error) {
	v, err := readVec(txn, ns, id, dst)
	if err != nil || len(v) != s.idx.dim {
		return nil, err
	}
	normalize(v)
	return v, nil
}

// readAll returns every stored experience (without vectors), in key
// order.
func readAll(txn *badger.Txn) ([]*hindsight.Experience, error) {
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256, Prefix: []byte(prefixExp)})
	defer it.Close()
	var all []*hindsight.Experience
	for it.Rewind(); it.Valid(); it.Next() {
		e := new(hindsight.Experience)
		if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, e) }); err != nil {
			return nil, fmt.Errorf("decode %q: %w", it.Item().Key(), err)
		}
		all = append(all, e)
	}
	return all, nil
}

// exactHead re-ranks the first exactTop of cands (ranked by their int8
// vectors) by the cosine of the stored float32 vectors, so that the top
// of the vector arm is the exact cosine's: quantisation error can swap
// near-ties, and fusion weighs the first ranks most. It returns the
// vectors it read by slot, which are sc's until sc is put back. The
// caller holds s.mu.
func (s *Store) exactHead(sc *scratch, q []float32, cands []scored) (map[int32][]float32, error) {
	head := cands[:min(len(cands), exactTop)]
	read := make(map[int32][]float32, len(head))
	dim := s.idx.dim
	if cap(sc.vecs) < exactTop*dim {
		sc.vecs = make([]float32, exactTop*dim)
	}
	err := s.db.View(func(txn *badger.Txn) error {
		for i := range head {
			d := &s.idx.docs[head[i].slot]
			v, err := s.unitVec(txn, s.idx.names[d.ns], d.id, sc.vecs[i*dim:(i+1)*dim:(i+1)*dim])
			if err != nil {
				return err
			}
			if v != nil {
				head[i].score = dot(q, v)
				read[head[i].slot] = v
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rescore vectors: %w", err)
	}
	selectTop(head, len(head))
	return read, nil
}
