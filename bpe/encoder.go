// Package bpe counts, encodes and decodes text in OpenAI's cl100k_base and
// o200k_base tokens, as github.com/pkoukk/tiktoken-go's EncodeOrdinary and
// Decode do, with a rank table the garbage collector does not scan. For
// cl100k_base it holds 2.1 MB live and allocates 3.2 MB in 10 ms to build
// it, where tiktoken-go keeps two maps of strings (11.7 MB live, every
// entry a pointer the collector walks; a full collection with it live took
// 13× as long) and allocates 24 MB in 95 ms to build them; o200k_base is
// about twice both. Measured by TestTableHeap and BenchmarkLoad and
// BenchmarkGC (see lab/bench/README.md, "The injector's tokenizer"). Counting
// is hand-written on that table (the pre-tokenising patterns stay on
// regexp2); the differential tests and fuzz targets hold it to tiktoken-go.
package bpe

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// Encoder tokenizes with one encoding's mergeable tokens (special tokens
// are plain text to it). It is safe for concurrent use.
type Encoder struct {
	name string
	t    *table
	re   *regexp2.Regexp
}

// Load builds the Encoder of the encoding name ("cl100k_base" or
// "o200k_base") from the rank file compiled into the binary (about 10 ms
// of CPU and 3 MB allocated for cl100k_base, twice that for o200k_base).
// Each call builds a new one: share the one it returns.
func Load(name string) (*Encoder, error) {
	spec, ok := encodings[name]
	if !ok {
		return nil, fmt.Errorf("load %s: unknown encoding", name)
	}
	t, err := loadTable(spec)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	re, err := regexp2.Compile(spec.pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("compile %s pattern: %w", name, err)
	}
	return &Encoder{name: name, t: t, re: re}, nil
}

// Name returns the name of the encoding, such as "o200k_base".
func (e *Encoder) Name() string { return e.name }

// Encode returns the tokens of s. Invalid UTF-8 is encoded as U+FFFD.
func (e *Encoder) Encode(s string) []int {
	var out []int
	e.pieces(s, func(piece []byte) {
		if r, ok := e.t.rank(piece); ok {
			out = append(out, r)
			return
		}
		bounds := e.merge(piece)
		for i := 0; i+1 < len(bounds); i++ {
			r, _ := e.t.rank(piece[bounds[i]:bounds[i+1]])
			out = append(out, r)
		}
	})
	return out
}

// Count returns the number of tokens in s, len(e.Encode(s)).
func (e *Encoder) Count(s string) int {
	n := 0
	e.pieces(s, func(piece []byte) {
		if _, ok := e.t.rank(piece); ok {
			n++
			return
		}
		n += len(e.merge(piece)) - 1
	})
	return n
}

// Decode returns the text of tokens, skipping any that is not a rank.
func (e *Encoder) Decode(tokens []int) string {
	var out []byte
	for _, r := range tokens {
		if r >= 0 && r < e.t.len() {
			out = append(out, e.t.token(r)...)
		}
	}
	return string(out)
}

// pieces calls f with the UTF-8 bytes of each match of the pattern in s, in
// order. The bytes are reused between calls.
func (e *Encoder) pieces(s string, f func([]byte)) {
	runes := []rune(s)
	var buf []byte
	m, err := e.re.FindRunesMatch(runes)
	for m != nil && err == nil {
		buf = buf[:0]
		for _, r := range runes[m.Index : m.Index+m.Length] {
			buf = utf8.AppendRune(buf, r)
		}
		f(buf)
		m, err = e.re.FindNextMatch(m)
	}
}

// merge splits piece into tokens by byte-pair merging: starting from single
// bytes, it joins the adjacent pair whose join has the lowest rank (the
// leftmost among equals) until no join is a token. It returns the tokens'
// boundaries, 0 first and len(piece) last.
func (e *Encoder) merge(piece []byte) []int {
	if len(piece) < 2 {
		return []int{0, len(piece)}
	}
	bounds := make([]int, len(piece)+1)
	for i := range bounds {
		bounds[i] = i
	}
	// joins[i] is the rank of the join of parts i and i+1.
	joins := make([]int, len(piece)-1)
	for i := range joins {
		joins[i] = e.joinRank(piece, bounds, i)
	}
	for len(joins) > 0 {
		best := 0
		for i, r := range joins {
			if r < joins[best] {
				best = i
			}
		}
		if joins[best] == math.MaxInt {
			break
		}
		bounds = append(bounds[:best+1], bounds[best+2:]...)
		joins = append(joins[:best], joins[best+1:]...)
		if best < len(joins) {
			joins[best] = e.joinRank(piece, bounds, best)
		}
		if best > 0 {
			joins[best-1] = e.joinRank(piece, bounds, best-1)
		}
	}
	return bounds
}

// joinRank returns the rank of parts i and i+1 joined, or math.MaxInt when
// the join is no token.
func (e *Encoder) joinRank(piece []byte, bounds []int, i int) int {
	if r, ok := e.t.rank(piece[bounds[i]:bounds[i+2]]); ok {
		return r
	}
	return math.MaxInt
}
