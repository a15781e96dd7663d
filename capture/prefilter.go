package capture

import (
	"strings"
	"unicode/utf8"
)

// A keywordIndex finds which of a fixed set of keywords occur in a text,
// case-insensitively, in one pass over the bytes: a table indexed by the
// first two bytes of every keyword points at the few keywords to compare
// there. It replaces an Aho-Corasick automaton walked byte by byte, which
// cost more than everything else the redactor does on text without secrets.
//
// Keywords match as strings.ToLower(text) would contain them: text with
// non-ASCII bytes is lower-cased first (some non-ASCII letters lower-case to
// ASCII ones, the Kelvin sign to 'k'); ASCII text is folded on the fly.
type keywordIndex struct {
	first []uint16 // 65536 entries: lower-cased first two bytes → 1+group, 0: none
	// has marks the non-zero entries of first: 8 KB that stay in the L1
	// cache, where first's 128 KB would not.
	has    [1 << 10]uint64
	groups [][]keyword
	all    uint64 // the union of every keyword's bits
}

// A keyword is lower-cased text and the bits it sets when found. p4 holds
// its first four bytes (fewer when it is shorter, m4 masking the rest),
// little endian, so most mismatches cost one comparison.
type keyword struct {
	text   string
	bits   uint64
	p4, m4 uint32
}

// minKeyword is the shortest keyword an index takes.
const minKeyword = 2

// add indexes keyword k (at least minKeyword bytes) with bits.
func (x *keywordIndex) add(k string, bits uint64) {
	if x.first == nil {
		x.first = make([]uint16, 1<<16)
	}
	k = strings.ToLower(k)
	if len(k) < minKeyword {
		panic("capture: keyword shorter than two bytes: " + k)
	}
	b := uint16(k[0])<<8 | uint16(k[1])
	if x.first[b] == 0 {
		x.groups = append(x.groups, nil)
		x.first[b] = uint16(len(x.groups))
		x.has[b>>6] |= 1 << (b & 63)
	}
	g := &x.groups[x.first[b]-1]
	kw := keyword{text: k, bits: bits}
	for j := 0; j < 4 && j < len(k); j++ {
		kw.p4 |= uint32(k[j]) << (8 * j)
		kw.m4 |= 0xff << (8 * j)
	}
	*g = append(*g, kw)
	x.all |= bits
}

// lowerASCII maps A-Z to a-z and every other byte to itself.
var lowerASCII = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] = byte(i + 'a' - 'A')
		}
	}
	return t
}()

// find returns the union of the bits of the keywords occurring in s,
// stopping early once stop's bits are all set (0: never).
func (x *keywordIndex) find(s string, stop uint64) uint64 {
	if x.first == nil || len(s) < minKeyword {
		return 0
	}
	return x.scan(s, stop, false)
}

// scan is find over s, lower-cased already when lowered.
func (x *keywordIndex) scan(s string, stop uint64, lowered bool) uint64 {
	if stop == 0 {
		stop = x.all
	}
	var found uint64
	first := x.first[:1<<16]
	prev := lowerASCII[s[0]]
	if prev >= utf8.RuneSelf && !lowered {
		return x.scan(strings.ToLower(s), stop, true)
	}
	for i := 1; i < len(s); i++ {
		c := lowerASCII[s[i]]
		if c >= utf8.RuneSelf && !lowered {
			return x.scan(strings.ToLower(s), stop, true)
		}
		b := uint16(prev)<<8 | uint16(c)
		prev = c
		if x.has[b>>6]&(1<<(b&63)) == 0 {
			continue
		}
		g := first[b]
		at := s[i-1:]
		var w uint32
		for j := 0; j < 4 && j < len(at); j++ {
			w |= uint32(lowerASCII[at[j]]) << (8 * j)
		}
		for _, k := range x.groups[g-1] {
			if w&k.m4 == k.p4 && found&k.bits != k.bits && hasPrefixFold(at, k.text) {
				found |= k.bits
				if found&stop == stop {
					return found
				}
			}
		}
	}
	return found
}

// hasPrefixFold reports whether s begins with lower (lower-cased ASCII or
// already lower-cased text), ignoring ASCII case in s.
func hasPrefixFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		if lowerASCII[s[i]] != lower[i] {
			return false
		}
	}
	return true
}
