package capture

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight/wire"
)

// stringEnd returns the index of the quote closing the string that opens
// at doc[start].
func stringEnd(doc []byte, start int) int { return stringEndFrom(doc, start+1) }

// stringEndFrom is stringEnd, scanning from doc[i], inside the string.
func stringEndFrom(doc []byte, i int) int {
	for ; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(doc) - 1
}

// decodeJSONString decodes a JSON string token (quotes included) of a
// document already checked by json.Valid. A string without escapes is
// returned as a view of raw, without copying.
func decodeJSONString(raw []byte) string {
	body := raw[1 : len(raw)-1]
	if !utf8.Valid(body) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s // invalid bytes become U+FFFD, one each
		}
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	if bytes.IndexByte(body, '\\') < 0 {
		// A view of the document, which is never modified while it is
		// redacted (a request or response as relayed, or a copy made for
		// a document nested in a string); nothing outlives it but copies.
		return wire.StringView(body)
	}
	b := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		// Copy the run up to the next escape at once.
		if n := bytes.IndexByte(body[i:], '\\'); n != 0 {
			if n < 0 {
				n = len(body) - i
			}
			b = append(b, body[i:i+n]...)
			if i += n - 1; i+1 >= len(body) {
				break
			}
			continue
		}
		if i+1 >= len(body) {
			b = append(b, '\\')
			break
		}
		i++
		switch body[i] {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'u':
			r, n := decodeEscapedRune(body[i-1:])
			b = utf8.AppendRune(b, r)
			i += n - 2
		default: // '"', '\\', '/'
			b = append(b, body[i])
		}
	}
	// b is not written again: the string may share its bytes.
	return wire.StringView(b)
}

// decodeEscapedRune decodes \uXXXX (and a following low surrogate) at the
// start of s, returning the rune and the bytes used; bad input gives
// U+FFFD, as encoding/json does.
func decodeEscapedRune(s []byte) (rune, int) {
	r1 := hex4(s)
	if r1 < 0 {
		return utf8.RuneError, 2
	}
	if utf16.IsSurrogate(r1) {
		if r2 := hex4(s[6:]); len(s) >= 12 && s[6] == '\\' && r2 >= 0 {
			if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
				return r, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r1, 6
}

// hex4 parses the XXXX of \uXXXX at the start of s, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
