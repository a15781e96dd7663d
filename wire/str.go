package wire

import (
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
	for i := 0; i < len(s); {
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
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
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
