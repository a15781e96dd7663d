package embedded

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// encodeIndex writes x (compacted: every slot live) after the header:
// the database's identity gen and the Badger version covers up to which
// x holds every write.
func encodeIndex(e *enc, x *index, gen []byte, covers uint64, embID string) {
	e.raw([]byte(snapshotMagic))
	e.u32(snapshotVersion)
	e.raw(gen)
	e.u64(covers)
	e.str(embID)
	e.u32(uint32(x.dim))
	e.u32(uint32(len(x.names)))
	for _, s := range x.names {
		e.str(s)
	}
	e.u32(uint32(len(x.docs)))
	for i := range x.docs {
		d := &x.docs[i]
		for _, v := range [...]int32{d.ns, d.server, d.tool, d.task, d.code, d.template, d.evidence, d.hits, d.length} {
			e.i32(v)
		}
		e.u8(flags(d.superseded, d.deleted, d.hasVec))
		e.i64(d.lastActive)
		e.u64(d.sum)
		e.str(d.id)
		e.f64(d.confidence)
		for _, t := range [...]time.Time{d.created, d.updated, d.lastHit} {
			e.time(t)
		}
	}
	e.align(vectorAlign)
	if x.from != nil {
		encodeVectorsFrom(e, x)
	}
	for c := range x.q {
		e.raw(int8Bytes(x.q[c]))
		e.raw(wordBytes(x.pos[c]))
		e.raw(wordBytes(x.neg[c]))
	}
	for _, v := range x.scales[:len(x.docs)] {
		e.f32(v)
	}
	terms := make([]string, 0, len(x.postings))
	total := 0
	for t, ps := range x.postings {
		terms = append(terms, t)
		total += int(ps.n)
	}
	slices.Sort(terms) // deterministic output
	e.u32(uint32(len(terms)))
	e.u32(uint32(total))
	for _, t := range terms {
		ps := x.postings[t]
		e.str(t)
		e.u32(uint32(ps.n))
		for slot, tf := range ps.all() {
			e.i32(slot)
			e.u16(tf)
		}
	}
}

// encodeVectorsFrom writes the vector chunks of x, a copy made without
// vectors (compactTo), from the slots they are copies of: the same bytes
// as a copy with vectors would hold (zero for a slot without one and
// past the last slot).
func encodeVectorsFrom(e *enc, x *index) {
	zq, zw := make([]int8, x.dim), make([]uint64, x.words)
	n := len(x.docs)
	for lo := 0; lo < n; lo += chunkSlots {
		for part := range 3 {
			for i := lo; i < lo+chunkSlots; i++ {
				if i >= n || !x.docs[i].hasVec {
					if part == 0 {
						e.raw(int8Bytes(zq))
					} else {
						e.raw(wordBytes(zw))
					}
					continue
				}
				pos, neg := x.from.code(x.src[i])
				switch part {
				case 0:
					e.raw(int8Bytes(x.from.quantised(x.src[i])))
				case 1:
					e.raw(wordBytes(pos))
				default:
					e.raw(wordBytes(neg))
				}
			}
		}
	}
}

func flags(bs ...bool) uint8 {
	var f uint8
	for i, b := range bs {
		if b {
			f |= 1 << i
		}
	}
	return f
}

// decodeIndex reads what encodeIndex wrote, checking the header against
// gen, embID and dim and every reference against the counts it read. It
// returns the Badger version the snapshot covers.
func decodeIndex(d *dec, gen []byte, embID string, dim int) (*index, uint64, error) {
	magic := make([]byte, len(snapshotMagic))
	d.raw(magic)
	if d.err == nil && string(magic) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: not an index snapshot", errCorrupt)
	}
	if v := d.u32(); d.err == nil && (v < oldestSnapshot || v > snapshotVersion) {
		return nil, 0, fmt.Errorf("index snapshot format %d, want %d to %d", v, oldestSnapshot, snapshotVersion)
	}
	g := make([]byte, len(gen))
	d.raw(g)
	if d.err == nil && !bytes.Equal(g, gen) {
		return nil, 0, fmt.Errorf("index snapshot is of another database (generation differs)")
	}
	covers := d.u64()
	if id := d.str(); d.err == nil && id != embID {
		return nil, 0, fmt.Errorf("index snapshot is of embedder %q, store uses %q", id, embID)
	}
	if n := d.u32(); d.err == nil && int(n) != dim {
		return nil, 0, fmt.Errorf("index snapshot has %d dimensions, store uses %d", n, dim)
	}
	x := newIndex(dim)
	x.names = make([]string, d.count(4))
	for i := range x.names {
		x.names[i] = d.str()
	}
	if d.err == nil && (len(x.names) == 0 || x.names[0] != "") {
		return nil, 0, fmt.Errorf("%w: bad string table", errCorrupt)
	}
	for i, s := range x.names {
		x.intern[s] = int32(i)
	}
	decodeDocs(d, x)
	decodeVectors(d, x)
	decodePostings(d, x)
	if d.err != nil {
		return nil, 0, d.err
	}
	if d.limit != 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes left over", errCorrupt, d.limit)
	}
	return x, covers, nil
}

// decodeDocs reads the slots and rebuilds the maps derived from them.
func decodeDocs(d *dec, x *index) {
	n := d.count(101) // the fixed part of a slot
	x.docs = make([]doc, n)
	x.meta = make([]filterMeta, n)
	x.lens = make([]float32, n)
	names := int32(len(x.names))
	for i := range x.docs {
		doc := &x.docs[i]
		for _, f := range [...]*int32{&doc.ns, &doc.server, &doc.tool, &doc.task, &doc.code, &doc.template} {
			if *f = d.i32(); *f < 0 || *f >= names {
				d.err = fmt.Errorf("%w: string %d out of range", errCorrupt, *f)
				*f = 0
			}
		}
		doc.evidence, doc.hits, doc.length = d.i32(), d.i32(), d.i32()
		fl := d.u8()
		doc.live, doc.superseded, doc.deleted, doc.hasVec = true, fl&1 != 0, fl&2 != 0, fl&4 != 0
		doc.lastActive = d.i64()
		doc.sum = d.u64()
		id := d.str()
		doc.confidence = d.f64()
		doc.created, doc.updated, doc.lastHit = d.time(), d.time(), d.time()
		if d.err != nil {
			return
		}
		k := key(x.names[doc.ns], id)
		if _, dup := x.byKey[k]; dup {
			d.err = fmt.Errorf("%w: experience %q twice", errCorrupt, id)
			return
		}
		doc.id = k[len(x.names[doc.ns])+1:]
		x.byKey[k] = int32(i)
		x.meta[i] = doc.filterMeta
		x.lens[i] = float32(doc.length)
		x.totalLen += int64(doc.length)
		for f, v := range [...]int32{doc.ns, doc.server, doc.tool, doc.task, doc.code} {
			fk := filterKey{byte(f), v}
			x.filters[fk] = append(x.filters[fk], int32(i))
		}
	}
	x.live = n
}

// decodeVectors passes over the vector chunks, recording where they
// are (readSnapshot maps them), and reads the scales.
func decodeVectors(d *dec, x *index) {
	n := len(x.docs)
	chunks := (n + chunkSlots - 1) / chunkSlots
	d.align(vectorAlign)
	x.regionOff = d.off
	d.skip(int64(chunks) * x.chunkBytes())
	x.scales = make([]float32, n)
	for i := range x.scales {
		x.scales[i] = d.f32()
	}
}

// decodePostings reads the postings, packing each term's (see plist)
// into one backing array.
func decodePostings(d *dec, x *index) {
	terms := d.count(8)
	total := d.count(6)
	x.postings = make(map[string]plist, terms)
	slots := int32(len(x.docs))
	var pk packer
	var ps []posting
	for range terms {
		t := d.str()
		n := d.count(6)
		if d.err != nil || n > total {
			if d.err == nil {
				d.err = fmt.Errorf("%w: postings overflow", errCorrupt)
			}
			return
		}
		total -= n
		ps = ps[:0]
		for range n {
			p := posting{slot: d.i32(), tf: d.u16()}
			if p.slot < 0 || p.slot >= slots {
				d.err = fmt.Errorf("%w: posting slot %d out of range", errCorrupt, p.slot)
				return
			}
			ps = append(ps, p)
		}
		x.postings[t] = pk.pack(ps)
	}
}
