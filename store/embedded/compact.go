package embedded

// compact returns a copy of the index holding its live slots only, in the
// same order: postings, filter lists and vectors are remapped rather than
// rebuilt, and only strings that a live slot uses stay interned (so a
// purged experience leaves no term or value behind).
func (x *index) compact() *index {
	nx := newIndex(x.dim)
	remap := make([]int32, len(x.docs))
	for slot := range x.docs {
		d := x.docs[slot]
		if !d.live {
			remap[slot] = -1
			continue
		}
		ns := int32(len(nx.docs))
		remap[slot] = ns
		for _, f := range [...]*int32{&d.ns, &d.server, &d.tool, &d.task, &d.code, &d.template} {
			*f = nx.id(x.names[*f])
		}
		for f, v := range [...]int32{d.ns, d.server, d.tool, d.task, d.code} {
			fk := filterKey{byte(f), v}
			nx.filters[fk] = append(nx.filters[fk], ns)
		}
		nx.grow(ns)
		if d.hasVec {
			copy(nx.quantised(ns), x.quantised(int32(slot)))
			np, nn := nx.code(ns)
			op, on := x.code(int32(slot))
			copy(np, op)
			copy(nn, on)
			nx.scales[ns] = x.scales[slot]
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
	for t, ps := range x.postings {
		var kept []posting
		for _, p := range ps {
			if s := remap[p.slot]; s >= 0 {
				kept = append(kept, posting{slot: s, tf: p.tf})
			}
		}
		if len(kept) > 0 {
			nx.postings[t] = kept
		}
	}
	return nx
}
