package wire

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// MaxNesting is encoding/json's limit on nested arrays and objects; deeper
// input is not valid JSON to it, and so not to Valid.
const MaxNesting = 10000

// Valid reports whether raw is one JSON value, as encoding/json.Valid
// does (FuzzValidJSON and TestValidAgreesWithEncodingJSON check that they
// agree), in one pass, without recursion and without allocating for input
// nested less than 32 levels deep.
func Valid(raw []byte) bool {
	i := SkipSpace(raw, 0)
	end, ok := SkipValue(raw, i, 0)
	return ok && SkipSpace(raw, end) == len(raw)
}

// SkipSpace returns the index of the first byte of b at or after i that
// is not JSON white space (len(b) if none).
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipValue validates the JSON value starting at b[i], nested depth levels
// deep, and returns the index just after it; false, with the index where
// it stopped, for what is not valid, which includes nesting deeper than
// MaxNesting.
func SkipValue(b []byte, i, depth int) (int, bool) {
	end, _, ok := walk(b, i, depth, true)
	return end, ok
}

// SkipDeep is SkipValue, but it follows the value however deep it nests
// and reports whether it nests deeper than MaxNesting (tooDeep) instead
// of refusing it: ok says it is valid JSON but for its depth.
func SkipDeep(b []byte, i, depth int) (end int, tooDeep, ok bool) {
	return walk(b, i, depth, false)
}

// walk validates the JSON value starting at b[i], nested depth levels
// deep, and returns the index just after it, without recursion. Nesting
// deeper than MaxNesting stops it when stopDeep is set; else it goes on
// and reports tooDeep.
func walk(b []byte, i, depth int, stopDeep bool) (end int, tooDeep, ok bool) {
	var stackBuf [32]byte
	stack := stackBuf[:0] // the open containers: '{' or '['
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return i, false, false
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth+len(stack)+1 > MaxNesting {
				if stopDeep {
					return i, true, false
				}
				tooDeep = true
			}
			i = SkipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' and ']' follow '{' and '[' by two
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i, ok = skipKey(b, i); !ok {
					return i, false, false
				}
			}
			continue
		case '"':
			if i, _, ok = SkipString(b, i); !ok {
				return i, false, false
			}
		case 't':
			if !bytes.HasPrefix(b[i:], []byte("true")) {
				return i, false, false
			}
			i += 4
		case 'f':
			if !bytes.HasPrefix(b[i:], []byte("false")) {
				return i, false, false
			}
			i += 5
		case 'n':
			if !bytes.HasPrefix(b[i:], []byte("null")) {
				return i, false, false
			}
			i += 4
		default:
			if i, ok = skipNumber(b, i); !ok {
				return i, false, false
			}
		}
		// After a value: close containers, or go on to the next element.
		for {
			if len(stack) == 0 {
				return i, tooDeep, true
			}
			i = SkipSpace(b, i)
			if i >= len(b) {
				return i, false, false
			}
			top := stack[len(stack)-1]
			if b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return i, false, false
			}
			i = SkipSpace(b, i+1)
			if top == '{' {
				if i, ok = skipKey(b, i); !ok {
					return i, false, false
				}
			}
			break
		}
	}
}

// skipKey skips an object key and its colon; it returns the index of the
// member's value.
func skipKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	i, _, ok := SkipString(b, i)
	if !ok {
		return i, false
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return SkipSpace(b, i+1), true
}

// plain marks the bytes that stand for themselves in a JSON string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// SkipString validates the string starting at b[i] (a quote) and returns
// the index after its closing quote and whether it holds escapes. Like
// encoding/json, it accepts invalid UTF-8.
func SkipString(b []byte, i int) (end int, escaped, ok bool) {
	end, escaped, _, ok = skipString(b, i)
	return end, escaped, ok
}

// SkipStringASCII is SkipString, also reporting whether the string's
// bytes are all ASCII (escapes are: "\u00e9" is).
func SkipStringASCII(b []byte, i int) (end int, escaped, ascii, ok bool) {
	end, escaped, or, ok := skipString(b, i)
	return end, escaped, or&0x8080808080808080 == 0, ok
}

// skipString is SkipString, also returning a word whose bytes' high bits
// are all clear if, and only if, the string's bytes are all ASCII: the OR
// of its words (of a word's bytes before the special one, of the bytes
// taken one at a time).
func skipString(b []byte, i int) (end int, escaped bool, or uint64, ok bool) {
	i++
	for {
		// Eight bytes at a time while none is special; the first special
		// byte of a word is found from its mask. Fewer than eight left:
		// one by one.
		for len(b)-i >= 8 {
			x := binary.LittleEndian.Uint64(b[i : i+8])
			if m := special8(x); m != 0 {
				// The bytes before the special one, and the special one's
				// low bits.
				or |= x & (1<<bits.TrailingZeros64(m) - 1)
				i += bits.TrailingZeros64(m) >> 3
				goto special
			}
			or |= x
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			or |= uint64(b[i])
			i++
		}
	special:
		if i >= len(b) {
			return i, escaped, or, false
		}
		switch b[i] {
		case '"':
			return i + 1, escaped, or, true
		case '\\':
			escaped = true
			i++
			if i >= len(b) {
				return i, escaped, or, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(b) {
					return i, escaped, or, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, escaped, or, false
					}
				}
				i += 5
			default:
				return i, escaped, or, false
			}
		default: // a control character
			return i, escaped, or, false
		}
	}
}

// special8 returns a mask with the high bit set in each of the eight bytes
// of x (little-endian) that is a quote, a backslash or a control character;
// zero when there is none. Bits may also be set, wrongly, in bytes after
// one that is special, never before it: the lowest set bit marks the first
// special byte exactly.
func special8(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	// Flipping bit 1 maps the quote (0x22) to 0x20 and keeps control
	// characters below 0x20: one test "below 0x21" finds both.
	q := x ^ (lo * 0x02)
	bs := x ^ (lo * '\\')
	return ((q-lo*0x21)&^q | (bs-lo)&^bs) & hi
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipNumber validates the number starting at b[i].
func skipNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}
