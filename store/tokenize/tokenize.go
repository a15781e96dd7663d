// Package tokenize splits text into the terms that Hindsight's lexical index
// and local embedder work on.
//
// Words are maximal runs of letters, digits and marks, lowercased (Unicode
// simple folding via unicode.ToLower), split further at ASCII punctuation
// such as '_', '.', '/' and '-' (but the joined identifier is kept too, so
// "read_file" yields "read_file", "read" and "file"). Han, Hiragana,
// Katakana and Hangul runs have no spaces between words, so they are indexed
// as overlapping character bigrams (a lone character stays a unigram), which
// is how most CJK search engines without a dictionary make such text
// searchable.
package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// isCJK reports whether r belongs to a script written without spaces.
func isCJK(r rune) bool {
	if r < 0x2E80 { // below the CJK radicals: Latin, Cyrillic, Greek…
		return false
	}
	switch r {
	case 'ー', 'ｰ', '々', '〆':
		return true
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// joiner reports whether r joins word parts into one identifier
// ("read_file", "fs.read", "ENOENT-2").
func joiner(r rune) bool {
	switch r {
	case '_', '.', '-', '/', ':':
		return true
	}
	return false
}

// Terms returns the index terms of s, in order, with repeats. It appends
// to dst (which may be nil) to let callers reuse memory.
func Terms(dst []string, s string) []string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case isCJK(r):
			j := i
			for j < len(s) {
				r2, n2 := utf8.DecodeRuneInString(s[j:])
				if !isCJK(r2) {
					break
				}
				j += n2
			}
			dst = cjkBigrams(dst, s[i:j])
			i = j
		case isWordRune(r):
			j := i
			parts := 1
			for j < len(s) {
				r2, n2 := utf8.DecodeRuneInString(s[j:])
				if isWordRune(r2) && !isCJK(r2) {
					j += n2
					continue
				}
				// A joiner between two word runes continues the identifier.
				if joiner(r2) && j+n2 < len(s) {
					r3, _ := utf8.DecodeRuneInString(s[j+n2:])
					if isWordRune(r3) && !isCJK(r3) {
						j += n2
						parts++
						continue
					}
				}
				break
			}
			word := strings.ToLower(s[i:j])
			dst = append(dst, word)
			if parts > 1 {
				dst = splitJoined(dst, word)
			}
			i = j
		default:
			i += n
		}
	}
	return dst
}

// splitJoined appends the parts of a joined identifier: first the
// segments between '.', '/' and ':' that are themselves joined by '_' or
// '-' ("fs.read_file" → "read_file"), then every atomic part.
func splitJoined(dst []string, word string) []string {
	if strings.ContainsAny(word, "./:") && strings.ContainsAny(word, "_-") {
		for _, seg := range strings.FieldsFunc(word, func(r rune) bool { return r == '.' || r == '/' || r == ':' }) {
			if strings.ContainsAny(seg, "_-") && strings.Trim(seg, "_-") == seg {
				dst = append(dst, seg)
			}
		}
	}
	start := -1
	for k, r := range word {
		if joiner(r) {
			if start >= 0 {
				dst = append(dst, word[start:k])
			}
			start = -1
			continue
		}
		if start < 0 {
			start = k
		}
	}
	if start >= 0 {
		dst = append(dst, word[start:])
	}
	return dst
}

func cjkBigrams(dst []string, run string) []string {
	var prev string
	count := 0
	for k, r := range run {
		cur := run[k : k+utf8.RuneLen(r)]
		if count > 0 {
			dst = append(dst, prev+cur)
		}
		prev = cur
		count++
	}
	if count == 1 {
		dst = append(dst, prev)
	}
	return dst
}

// stop holds very common English function words. They carry little weight
// in BM25 anyway; dropping them keeps posting lists short.
var stop = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be but by for from has have if in into is it its
		of on or so such that the their then there these this to was were will with when which while
		do does did not no can could should would i you we they he she them our your my me after before`) {
		stop[w] = true
	}
}

// Stop reports whether term is an English stop word.
func Stop(term string) bool { return stop[term] }

// IndexTerms is Terms without stop words.
func IndexTerms(dst []string, s string) []string {
	all := Terms(dst, s)
	out := all[:len(dst)]
	for _, t := range all[len(dst):] {
		if !stop[t] {
			out = append(out, t)
		}
	}
	return out
}
