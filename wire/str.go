package wire

import (
	"encoding/binary"
	"math/bits"
	"time"
	"unicode/utf8"
	"unsafe"
)

// escapes says how a string escaper writes each ASCII byte: as itself (0),
// as \u00XX ('u'), or as a backslash and the byte given.
type escapes [utf8.RuneSelf]byte

// jsonEscapes are encoding/json's: quote, backslash, the short forms of
// \b \f \n \r \t, other control characters as \u00XX, and the HTML
// characters < > & as \u00XX.
var jsonEscapes = func() (e escapes) {
	for c := range 0x20 {
		e[c] = 'u'
	}
	e['"'], e['\\'] = '"', '\\'
	e['\b'], e['\f'], e['\n'], e['\r'], e['\t'] = 'b', 'f', 'n', 'r', 't'
	e['<'], e['>'], e['&'] = 'u', 'u', 'u'
	return e
}()

// plainEscapes leave the HTML characters as they are, write \b and \f as
// \u00XX and escape DEL too.
var plainEscapes = func() (e escapes) {
	for c := range 0x20 {
		e[c] = 'u'
	}
	e[0x7f] = 'u'
	e['"'], e['\\'] = '"', '\\'
	e['\n'], e['\r'], e['\t'] = 'n', 'r', 't'
	return e
}()

// AppendString appends s as a JSON string, escaped as encoding/json does
// (HTML characters included; invalid UTF-8 becomes U+FFFD).
func AppendString(b []byte, s string) []byte { return appendEscaped(b, s, &jsonEscapes) }

// AppendPlainString appends s as a JSON string as AppendString does, but
// leaves < > & as they are, writes \b and \f as \u0008 and \u000c, and
// escapes DEL: the form capture writes into the bodies it builds.
func AppendPlainString(b []byte, s string) []byte { return appendEscaped(b, s, &plainEscapes) }

// appendEscaped appends s quoted, escaping ASCII bytes as e says, invalid
// UTF-8 as \ufffd (a byte at a time) and U+2028 and U+2029 as \u2028 and
// \u2029.
func appendEscaped(b []byte, s string, e *escapes) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	i := 0
	if len(s) >= 8 {
		i = skipUnescaped(s, 0)
	}
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			esc := e[c]
			if esc == 0 {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			if esc == 'u' {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			} else {
				b = append(b, '\\', esc)
			}
			i++
			start = i
			if i+8 <= len(s) {
				i = skipUnescaped(s, i)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			if i+8 <= len(s) {
				i = skipUnescaped(s, i)
			}
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			if i+8 <= len(s) {
				i = skipUnescaped(s, i)
			}
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// skipUnescaped returns the index of the first byte of s at or after i
// that either escaper may write otherwise than as itself, looking eight
// bytes at a time; it may return an earlier index when fewer than eight
// bytes are left (the caller looks at those one at a time).
func skipUnescaped(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if m := mayEscape8(binary.LittleEndian.Uint64(BytesView(s[i : i+8]))); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return i
}

// mayEscape8 returns a mask with the high bit set in each of the eight
// bytes of x (little-endian) that either escaper may write otherwise than
// as itself: a control character, a quote, a backslash, < > &, DEL, or a
// byte that is not ASCII; zero when there is none. Bits may also be set,
// wrongly, in bytes after one that is marked, never before it: the lowest
// set bit marks the first such byte exactly.
func mayEscape8(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	// A byte of q is zero for a quote (0x22) or & (0x26), of a for < (0x3c)
	// or > (0x3e), of bs for a backslash.
	q := (x ^ lo*0x22) &^ (lo * 0x04)
	a := (x ^ lo*0x3c) &^ (lo * 0x02)
	bs := x ^ lo*'\\'
	// x+lo sets the high bit of DEL (and carries only out of 0xff, which
	// x marks itself); x-0x20 borrows from control characters.
	return (x | (x + lo) | (x-lo*0x20)&^x | (q-lo)&^q | (a-lo)&^a | (bs-lo)&^bs) & hi
}

// AppendTime appends t as json.Marshal encodes it (time.Time's
// MarshalJSON), with its error for a time it cannot encode.
func AppendTime(b []byte, t time.Time) ([]byte, error) {
	b, err := t.AppendText(append(b, '"'))
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

// StringView views b as a string without copying; b must not change while
// the string is used, and nothing kept may point into it.
func StringView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// BytesView views s as bytes without copying; they must not be modified.
func BytesView(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
