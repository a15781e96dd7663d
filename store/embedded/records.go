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
// the vector); vectors are little-endian float32, as the embedder made
// them.
const (
	prefixExp = "exp/"
	prefixVec = "vec/"
)

func expKey(ns, id string) []byte { return []byte(prefixExp + key(ns, id)) }
func vecKey(ns, id string) []byte { return []byte(prefixVec + key(ns, id)) }

func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeVec(b []byte, dst []float32) []float32 {
	v := dst[:0]
	if cap(v) < len(b)/4 {
		v = make([]float32, len(b)/4)
	}
	v = v[:len(b)/4]
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
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
