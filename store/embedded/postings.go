package embedded

import (
	"encoding/binary"
	"iter"
	"slices"
)

// posting is one document of a term: its slot and how often the term
// occurs in it.
type posting struct {
	slot int32
	tf   uint16
}

// plist is a term's postings packed in ascending slot order: per
// posting the gap from the previous slot (the first: the slot itself)
// shifted left one bit, the bit set when the term frequency is not 1,
// as a uvarint, then that frequency as a uvarint. A posting takes one
// or two bytes in a common term's list instead of the eight of a
// posting struct.
type plist struct {
	b    []byte
	last int32 // the last slot added
	n    int32 // postings in b
}

// add appends a posting for slot, which must be above every slot in p.
func (p *plist) add(slot int32, tf uint16) {
	gap := slot
	if p.n > 0 {
		gap -= p.last
	}
	v := uint64(gap) << 1
	if tf != 1 {
		v |= 1
	}
	p.b = binary.AppendUvarint(p.b, v)
	if tf != 1 {
		p.b = binary.AppendUvarint(p.b, uint64(tf))
	}
	p.last = slot
	p.n++
}

// all yields the postings of p in slot order.
func (p plist) all() iter.Seq2[int32, uint16] {
	return func(yield func(int32, uint16) bool) {
		b := p.b
		slot := int32(0)
		for len(b) > 0 {
			v, k := uvarint(b)
			b = b[k:]
			slot += int32(v >> 1)
			tf := uint16(1)
			if v&1 != 0 {
				t, k := uvarint(b)
				b = b[k:]
				tf = uint16(t)
			}
			if !yield(slot, tf) {
				return
			}
		}
	}
}

// uvarint is binary.Uvarint with the one-byte case first; b was written
// by add, so it holds a whole uvarint.
func uvarint(b []byte) (uint64, int) {
	if b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return binary.Uvarint(b)
}

// packer packs postings lists into shared blocks of bytes (fewer
// allocations than one per term, none copied twice).
type packer struct {
	scratch []byte
	block   []byte
}

// pack returns ps (any order, each slot once; sorted in place) as a
// plist whose bytes are capped, so that a later add copies them out of
// the shared block.
func (k *packer) pack(ps []posting) plist {
	if !slices.IsSortedFunc(ps, cmpSlot) {
		slices.SortFunc(ps, cmpSlot)
	}
	p := plist{b: k.scratch[:0]}
	for _, q := range ps {
		p.add(q.slot, q.tf)
	}
	k.scratch = p.b
	if len(k.block)+len(p.b) > cap(k.block) {
		k.block = make([]byte, 0, max(64<<10, len(p.b)))
	}
	start := len(k.block)
	k.block = append(k.block, p.b...)
	p.b = k.block[start:len(k.block):len(k.block)]
	return p
}

func cmpSlot(a, b posting) int { return int(a.slot - b.slot) }
