package capture

import (
	"encoding/binary"
	"unicode/utf8"
)

// textKind says how cleanJSON can search a JSON string token for keywords.
type textKind uint8

const (
	// plainText is ASCII without escapes: its bytes are its value.
	plainText textKind = iota
	// escapedText is ASCII whose escapes all stand for a byte no keyword
	// holds ("\n" in file contents, "\"" in quoted code). A keyword in
	// its value lies between two escapes, where the token's bytes are the
	// value's, so searching the token finds every keyword the value holds
	// (and perhaps more, such as "napi" in "\napi"), without decoding it.
	escapedText
	// otherText must be decoded first: non-ASCII, "\u" escapes, or an
	// escape standing for a byte some keyword holds.
	otherText
)

// unescaped maps the letter after a backslash to the byte it stands for;
// 0 for 'u' (and for letters that are no escape).
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// scanString returns the index of the quote closing the string token that
// opens at doc[start] (of a valid document) and how it can be searched for
// x's keywords.
func (x *keywordIndex) scanString(doc []byte, start int) (int, textKind) {
	var or byte
	kind := plainText
	for i := start + 1; i < len(doc); {
		// Skip blocks of plain bytes, then look at the next eight one by one.
		i = skipPlain(doc, i)
		for block := min(i+8, len(doc)); i < block; i++ {
			switch c := doc[i]; c {
			case '\\':
				if i+1 == len(doc) {
					return i, otherText
				}
				if d := unescaped[doc[i+1]]; d == 0 || x.inKeyword[d] {
					return stringEndFrom(doc, i), otherText
				}
				kind = escapedText
				i++
			case '"':
				if or >= utf8.RuneSelf {
					return i, otherText
				}
				return i, kind
			default:
				or |= c
			}
		}
	}
	return len(doc) - 1, otherText
}

// mayHoldJSON reports whether the value of an escapedText token's body may
// begin, after white space, with '{' or '[': whether it may hold a
// document that cleanJSON must decode and look into.
func mayHoldJSON(body []byte) bool {
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == ' ':
		case c == '\\' && i+1 < len(body) && (body[i+1] == 'n' || body[i+1] == 't' || body[i+1] == 'r' || body[i+1] == 'f'):
			i++
		default:
			return c == '{' || c == '['
		}
	}
	return false
}

// skipPlain skips, from doc[i], eight bytes at a time, the blocks that
// hold no quote, no backslash and no byte that is not ASCII; it returns
// the start of the first block that does, or of the last few bytes.
func skipPlain(doc []byte, i int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(doc); i += 8 {
		w := binary.LittleEndian.Uint64(doc[i:])
		q, b := w^(lo*'"'), w^(lo*'\\')
		// A byte of q or b is zero where w holds a quote or backslash.
		if (w|(q-lo)&^q|(b-lo)&^b)&hi != 0 {
			return i
		}
	}
	return i
}
