package capture

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight/wire"
)

// A keywordIndex finds which of a fixed set of keywords occur in a text,
// case-insensitively, in one pass over the bytes. At each position a few
// bit tests on the next four bytes (ASCII-folded, so that case does not
// matter) rule out almost every place where no keyword begins; only the
// rest are compared with the keywords that start with the same two bytes.
// It replaces an Aho-Corasick automaton walked byte by byte, which cost more
// than everything else the redactor does on text without secrets.
//
// Keywords match as strings.ToLower(text) would contain them: text with
// non-ASCII bytes is lower-cased first (some non-ASCII letters lower-case to
// ASCII ones, the Kelvin sign to 'k'); ASCII text is folded on the fly.
type keywordIndex struct {
	first []uint16 // 65536 entries: lower-cased first two bytes → 1+group, 0: none
	// grams is the filter, 8 KB that stay in the L1 cache: a bit for the
	// hash of every keyword's first three bytes, folded (for two-byte
	// keywords, of each of them followed by any byte).
	grams  [1 << 10]uint64
	groups [][]keyword
	all    uint64 // the union of every keyword's bits
	// inKeyword marks the bytes some keyword holds (lower-cased).
	inKeyword [256]bool
}

// A keyword is lower-cased text and the bits it sets when found. p4 holds
// its first four bytes (fewer when it is shorter, m4 masking the rest),
// little endian and folded as fold4 folds, so most mismatches cost one
// comparison.
type keyword struct {
	text   string
	bits   uint64
	p4, m4 uint32
}

// minKeyword is the shortest keyword an index takes.
const minKeyword = 2

// fold4 is the ASCII case fold of four bytes at once: setting bit 5 maps
// A-Z to a-z. It maps a few other bytes together too ('_' and DEL), which
// only lets more positions through the filters, never fewer.
const fold4 = 0x20202020

// gramHash maps folded bytes to a filter's bit.
func gramHash(w uint32) uint32 { return (w * 0x9E3779B1) >> 16 }

func setBit(f *[1 << 10]uint64, b uint32) { f[b>>6] |= 1 << (b & 63) }

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
	kw := keyword{text: k, bits: bits}
	for j := 0; j < 4 && j < len(k); j++ {
		kw.p4 |= uint32(k[j]) << (8 * j)
		kw.m4 |= 0xff << (8 * j)
	}
	kw.p4 = (kw.p4 | fold4) & kw.m4
	*g = append(*g, kw)
	x.all |= bits
	for j := 0; j < len(k); j++ {
		x.inKeyword[k[j]] = true
	}
	f := (kw.p4 | fold4) & 0xffffff
	if len(k) > 2 {
		setBit(&x.grams, gramHash(f))
		return
	}
	for c := range uint32(256) {
		setBit(&x.grams, gramHash(f&0xffff|(c|0x20)<<16))
	}
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
	if stop == 0 {
		stop = x.all
	}
	if !isASCII(s) {
		s = strings.ToLower(s)
	}
	return x.findASCII(s, stop)
}

// findASCII is find for text known to be ASCII (or lower-cased already).
func (x *keywordIndex) findASCII(s string, stop uint64) uint64 {
	if x.first == nil || len(s) < minKeyword {
		return 0
	}
	if stop == 0 {
		stop = x.all
	}
	var found uint64
	g := &x.grams
	b := wire.BytesView(s)
	i := 0
	// Six positions per eight bytes read: m marks those the filter lets
	// through, rarely any, where the keywords are then looked for.
	for ; i+8 <= len(b); i += 6 {
		w := binary.LittleEndian.Uint64(b[i:i+8]) | fold4<<32 | fold4
		h0, h1 := gramHash(uint32(w)&0xffffff), gramHash(uint32(w>>8)&0xffffff)
		h2, h3 := gramHash(uint32(w>>16)&0xffffff), gramHash(uint32(w>>24)&0xffffff)
		h4, h5 := gramHash(uint32(w>>32)&0xffffff), gramHash(uint32(w>>40)&0xffffff)
		m := g[h0>>6]>>(h0&63)&1 | g[h1>>6]>>(h1&63)&1<<1 | g[h2>>6]>>(h2&63)&1<<2 |
			g[h3>>6]>>(h3&63)&1<<3 | g[h4>>6]>>(h4&63)&1<<4 | g[h5>>6]>>(h5&63)&1<<5
		for ; m != 0; m &= m - 1 {
			if found |= x.at(s[i+bits.TrailingZeros64(m):], found); found&stop == stop {
				return found
			}
		}
	}
	for ; i+4 <= len(b); i++ {
		if found |= x.filtered(s, i, found); found&stop == stop {
			return found
		}
	}
	for ; i+minKeyword <= len(s); i++ { // the last two or three bytes
		if found |= x.at(s[i:], found); found&stop == stop {
			return found
		}
	}
	return found
}

// filtered is at(s[i:], found) where the filter lets position i through
// (s[i:] holds four bytes at least), and 0 elsewhere.
func (x *keywordIndex) filtered(s string, i int, found uint64) uint64 {
	h := gramHash((binary.LittleEndian.Uint32(wire.BytesView(s[i:i+4])) | fold4) & 0xffffff)
	if x.grams[h>>6&1023]&(1<<(h&63)) == 0 {
		return 0
	}
	return x.at(s[i:], found)
}

// at returns the bits of the keywords s begins with, skipping those whose
// bits are all in found already.
func (x *keywordIndex) at(s string, found uint64) uint64 {
	g := x.first[uint16(lowerASCII[s[0]])<<8|uint16(lowerASCII[s[1]])]
	if g == 0 {
		return 0
	}
	// Folding is coarser than lower-casing: p4 rules out most keywords,
	// hasPrefixFold decides.
	var w uint32
	if len(s) >= 4 {
		w = binary.LittleEndian.Uint32(wire.BytesView(s[:4])) | fold4
	} else {
		for j := 0; j < len(s); j++ {
			w |= uint32(s[j]|0x20) << (8 * j)
		}
	}
	var bits uint64
	for _, k := range x.groups[g-1] {
		if w&k.m4 == k.p4 && (found|bits)&k.bits != k.bits && hasPrefixFold(s, k.text) {
			bits |= k.bits
		}
	}
	return bits
}

// isASCII reports whether s holds only ASCII bytes, eight at a time.
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if binary.LittleEndian.Uint64(wire.BytesView(s[i:]))&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
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

// findText is find(s, 0), skipping the look for non-ASCII bytes when ascii
// says s has none.
func (x *keywordIndex) findText(s string, ascii bool) uint64 {
	if ascii {
		return x.findASCII(s, 0)
	}
	return x.find(s, 0)
}

// keywordsIndex indexes the gitleaks keywords (gitleaksBit) and those of
// the built-in text rules (bit i: builtinText[i]).
var keywordsIndex = sync.OnceValues(func() (*keywordIndex, error) {
	x := &keywordIndex{}
	for _, k := range gitleaksKeywords {
		if len(k) < minKeyword {
			return nil, fmt.Errorf("load gitleaks rules: keyword %q shorter than %d bytes", k, minKeyword)
		}
		if !keywordInLeaf(k) {
			return nil, fmt.Errorf("load gitleaks rules: keyword %q could span two strings of a document; cleanJSON cannot look for it", k)
		}
		x.add(k, gitleaksBit)
	}
	if len(gitleaksKeywords) < 100 {
		return nil, fmt.Errorf("load gitleaks rules: only %d keywords read from its rule file", len(gitleaksKeywords))
	}
	for i, rule := range builtinText {
		for _, k := range rule.keywords {
			if !keywordInLeaf(k) {
				return nil, fmt.Errorf("redact rule %s: keyword %q could span two strings of a document", rule.id, k)
			}
			x.add(k, 1<<i)
		}
	}
	return x, nil
})

// keywordInLeaf reports whether keyword k can only occur in the "key:
// value" lines that redactJSON scans within one key or one value: it holds
// no line break and no ": ", does not begin with a space and does not end
// with a colon.
func keywordInLeaf(k string) bool {
	return !strings.Contains(k, "\n") && !strings.Contains(k, ": ") && !strings.HasPrefix(k, " ") && !strings.HasSuffix(k, ":")
}
