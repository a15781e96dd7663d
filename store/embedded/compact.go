package embedded

import (
	"slices"
	"strings"
)

// compact returns a copy of the index holding its live slots only, in the
// same order or, with byKey, in the order of their keys (the order a
// rebuild from Badger makes, so that ties rank alike either way).
// Postings, filter lists and vectors are remapped rather than rebuilt, and
// only strings that a live slot uses stay interned (so a purged
// experience leaves no term or value behind).
func (x *index) compact(byKey bool) *index { return x.compactTo(byKey, true) }

// compactTo is compact; without vecs the copy holds no vectors of its
// own but reads them from x's chunks (from, src), which only an encoder
// may do (see Store.checkpointHeld): a snapshot is written without a
// copy of every vector on the heap.
func (x *index) compactTo(byKey, vecs bool) *index {
	nx := newIndex(x.dim)
	if !vecs {
		nx.from = &vectors{dim: x.dim, words: x.words, q: slices.Clone(x.q), pos: slices.Clone(x.pos), neg: slices.Clone(x.neg)}
		nx.src = make([]int32, 0, x.live)
	}
	order := make([]int32, 0, x.live)
	for slot := range x.docs {
		if x.docs[slot].live {
			order = append(order, int32(slot))
		}
	}
	if byKey {
		keys := make([]string, len(x.docs))
		for _, slot := range order {
			d := &x.docs[slot]
			keys[slot] = key(x.names[d.ns], d.id)
		}
		slices.SortFunc(order, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	}
	remap := make([]int32, len(x.docs))
	for i := range remap {
		remap[i] = -1
	}
	for _, slot := range order {
		d := x.docs[slot]
		ns := int32(len(nx.docs))
		remap[slot] = ns
		for _, f := range [...]*int32{&d.ns, &d.server, &d.tool, &d.task, &d.code, &d.template} {
			*f = nx.id(x.names[*f])
		}
		for f, v := range [...]int32{d.ns, d.server, d.tool, d.task, d.code} {
			fk := filterKey{byte(f), v}
			nx.filters[fk] = append(nx.filters[fk], ns)
		}
		switch {
		case !vecs:
			nx.src = append(nx.src, slot)
			scale := float32(0)
			if d.hasVec {
				scale = x.scales[slot]
			}
			nx.scales = append(nx.scales, scale)
		default:
			nx.grow(ns)
			if d.hasVec {
				copy(nx.quantised(ns), x.quantised(slot))
				np, nn := nx.code(ns)
				op, on := x.code(slot)
				copy(np, op)
				copy(nn, on)
				nx.scales[ns] = x.scales[slot]
			}
		}
		k := key(nx.names[d.ns], d.id)
		d.id = k[len(nx.names[d.ns])+1:]
		nx.docs = append(nx.docs, d)
		nx.meta = append(nx.meta, d.filterMeta)
		nx.lens = append(nx.lens, float32(d.length))
		nx.byKey[k] = ns
		nx.live++
		nx.totalLen += int64(d.length)
	}
	var kept []posting
	var pk packer
	for t, ps := range x.postings {
		kept = kept[:0]
		for slot, tf := range ps.all() {
			if s := remap[slot]; s >= 0 {
				kept = append(kept, posting{slot: s, tf: tf})
			}
		}
		if len(kept) > 0 {
			nx.postings[t] = pk.pack(kept) // sorts when byKey reordered the slots
		}
	}
	return nx
}
