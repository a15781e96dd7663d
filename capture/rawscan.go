package capture

import (
	"bytes"

	"github.com/hindsight-proxy/hindsight/wire"
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
	end, kind, _ := x.scanToken(doc, start)
	return end, kind
}

// scanToken is scanString for any input: ok says whether doc[start:]
// begins with a valid JSON string token, as wire.SkipString checks it
// (when not, end is where the check stopped).
func (x *keywordIndex) scanToken(doc []byte, start int) (end int, kind textKind, ok bool) {
	after, escaped, ascii, ok := wire.SkipStringASCII(doc, start)
	if !ok {
		return after, otherText, false
	}
	end = after - 1
	body := doc[start+1 : end]
	if !ascii {
		return end, otherText, true
	}
	if !escaped {
		return end, plainText, true
	}
	for i := bytes.IndexByte(body, '\\'); i >= 0; {
		// A valid token's backslash starts an escape: a byte follows.
		if d := unescaped[body[i+1]]; d == 0 || x.inKeyword[d] {
			return end, otherText, true
		}
		i += 2
		j := bytes.IndexByte(body[i:], '\\')
		if j < 0 {
			break
		}
		i += j
	}
	return end, escapedText, true
}

// unescapeASCII appends the value of an escapedText token's body to dst.
func unescapeASCII(dst, body []byte) []byte {
	for {
		i := bytes.IndexByte(body, '\\')
		if i < 0 {
			return append(dst, body...)
		}
		dst = append(dst, body[:i]...)
		dst = append(dst, unescaped[body[i+1]])
		body = body[i+2:]
	}
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
