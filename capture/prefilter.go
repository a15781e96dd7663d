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
	first  []uint16 // 65536 entries: lower-cased first two bytes → 1+group, 0: none
	groups [][]keyword
	all    uint64 // the union of every keyword's bits
}

// A keyword is lower-cased text and the bits it sets when found.
type keyword struct {
	text string
	bits uint64
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
	}
	g := &x.groups[x.first[b]-1]
	*g = append(*g, keyword{text: k, bits: bits})
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
		g := first[uint16(prev)<<8|uint16(c)]
		prev = c
		if g == 0 {
			continue
		}
		at := s[i-1:]
		for _, k := range x.groups[g-1] {
			if found&k.bits != k.bits && hasPrefixFold(at, k.text) {
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
