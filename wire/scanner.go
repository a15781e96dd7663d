package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"
)

// scanner reads JSON as strictly as encoding/json (whose grammar it
// follows) or more: what it takes, encoding/json takes too.
type scanner struct {
	b     []byte
	i     int
	depth int      // the nesting it follows; 0: maxDepth
	names []string // the "derived" member fill read
	stamp stamp    // the last time it parsed in full
}

// maxDepth bounds the nesting the scanner follows by default (encoding/json
// follows 10000); deeper input goes to the general path.
const maxDepth = 512

// ws consumes white space.
func (sc *scanner) ws() { sc.i = SkipSpace(sc.b, sc.i) }

// byte consumes c if it comes next.
func (sc *scanner) byte(c byte) bool {
	if sc.i < len(sc.b) && sc.b[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// lit consumes the literal s if it comes next.
func (sc *scanner) lit(s string) bool {
	if len(sc.b)-sc.i >= len(s) && string(sc.b[sc.i:sc.i+len(s)]) == s {
		sc.i += len(s)
		return true
	}
	return false
}

func (sc *scanner) peek() byte {
	if sc.i < len(sc.b) {
		return sc.b[sc.i]
	}
	return 0
}

// str consumes a string and returns what is between its quotes; plain
// says it has no escapes.
func (sc *scanner) str() (s []byte, plain, ok bool) {
	if !sc.byte('"') {
		return nil, false, false
	}
	start := sc.i
	plain = true
	b := sc.b
	quote := -1 // the next quote at or after i, once looked for
	for i := sc.i; i < len(b); {
		// Eight bytes at a time while none is a quote, a backslash or a
		// control character; past sixteen, a run (see plainRun). Then on
		// to the first that is.
		if i+8 <= len(b) {
			m := special8(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				if i+8 <= len(b) && special8(binary.LittleEndian.Uint64(b[i:])) == 0 {
					i, quote = plainRun(b, i+8, quote)
				}
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		switch c := b[i]; {
		case c == '"':
			sc.i = i + 1
			return b[start:i], plain, true
		case c == '\\':
			plain = false
			if i+1 >= len(b) {
				return nil, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			i++
		}
	}
	return nil, false, false
}

// plainRun returns the index of the first quote, backslash or control
// character in b at or after i (len(b) if none), and the index of the
// first quote at or after it (-1 if none). quote is that of an earlier
// call for the same string, or -1: a string with many escapes is searched
// for its closing quote once, not once per escape.
func plainRun(b []byte, i, quote int) (end, nextQuote int) {
	if quote < i {
		if quote = bytes.IndexByte(b[i:], '"'); quote < 0 {
			return len(b), -1
		}
		quote += i
	}
	end = quote
	if n := bytes.IndexByte(b[i:quote], '\\'); n >= 0 {
		end = i + n
	}
	if n := control(b[i:end]); n >= 0 {
		end = i + n
	}
	return end, quote
}

// control returns the index of the first byte of b below 0x20, or -1.
func control(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	// A byte of v is below 0x20 when v-0x20 borrows into its high bit
	// while the byte's own high bit is clear; a borrow from a lower byte
	// can only flag more bytes when one already is.
	for ; i+16 <= len(b); i += 16 {
		x, y := binary.LittleEndian.Uint64(b[i:]), binary.LittleEndian.Uint64(b[i+8:])
		if ((x-ones*0x20)&^x|(y-ones*0x20)&^y)&highs != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return i
		}
	}
	return -1
}

// number consumes a number and returns it.
func (sc *scanner) number() ([]byte, bool) {
	if sc.i >= len(sc.b) {
		return nil, false
	}
	start := sc.i
	end, ok := skipNumber(sc.b, start)
	if !ok {
		return nil, false
	}
	sc.i = end
	return sc.b[start:end], true
}

// skip consumes any value.
func (sc *scanner) skip(depth int) bool {
	switch c := sc.peek(); {
	case c == '"':
		_, _, ok := sc.str()
		return ok
	case c == '{', c == '[':
		if depth >= maxDepth && depth >= sc.depth {
			return false
		}
		sc.i++
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		sc.ws()
		if sc.byte(end) {
			return true
		}
		for {
			if c == '{' {
				if _, _, ok := sc.str(); !ok {
					return false
				}
				sc.ws()
				if !sc.byte(':') {
					return false
				}
				sc.ws()
			}
			if !sc.skip(depth + 1) {
				return false
			}
			sc.ws()
			if sc.byte(end) {
				return true
			}
			if !sc.byte(',') {
				return false
			}
			sc.ws()
		}
	case c == 't':
		return sc.lit("true")
	case c == 'f':
		return sc.lit("false")
	case c == 'n':
		return sc.lit("null")
	}
	_, ok := sc.number()
	return ok
}

// value consumes any value and returns it.
func (sc *scanner) value() ([]byte, bool) {
	start := sc.i
	ok := sc.skip(1)
	return sc.b[start:sc.i], ok
}

// plainString consumes a string that needs no unescaping and is valid
// UTF-8, or null ("").
func (sc *scanner) plainString() (string, bool) {
	if sc.lit("null") {
		return "", true
	}
	s, plain, ok := sc.str()
	return StringView(s), ok && plain && utf8.Valid(s)
}

// anyString consumes a string or null.
func (sc *scanner) anyString() bool {
	if sc.lit("null") {
		return true
	}
	_, _, ok := sc.str()
	return ok
}

// time consumes a time as time.Time's UnmarshalJSON reads it. A time in
// the same second and zone as the last one it parsed in full (the steps
// of a batch mostly are) is that one's second plus its own fraction.
func (sc *scanner) time() (time.Time, bool) {
	var t time.Time
	if sc.lit("null") {
		return t, true
	}
	start := sc.i
	s, plain, ok := sc.str()
	if !ok {
		return t, false
	}
	if plain {
		if t, ok := sc.stamp.reuse(s); ok {
			return t, true
		}
	}
	if t.UnmarshalJSON(sc.b[start:sc.i]) != nil {
		return t, false
	}
	if plain {
		sc.stamp.keep(s, t)
	}
	return t, true
}

// int consumes an integer that fits an int, or null (0).
func (sc *scanner) int() (int, bool) {
	n, ok := sc.numeral()
	if n == nil {
		return 0, ok
	}
	v, err := strconv.ParseInt(StringView(n), 10, 64)
	return int(v), err == nil && v == int64(int(v))
}

// numeral consumes a number and returns it, or null (nil, true); nil,
// false for anything else.
func (sc *scanner) numeral() ([]byte, bool) {
	if sc.lit("null") {
		return nil, true
	}
	n, ok := sc.number()
	if !ok {
		return nil, false
	}
	return n, true
}

// uint consumes an integer that fits a uint64, or null (0).
func (sc *scanner) uint() (uint64, bool) {
	n, ok := sc.numeral()
	if n == nil {
		return 0, ok
	}
	v, err := strconv.ParseUint(StringView(n), 10, 64)
	return v, err == nil
}

// float consumes a number that fits a float64, or null (0).
func (sc *scanner) float() (float64, bool) {
	n, ok := sc.numeral()
	if n == nil {
		return 0, ok
	}
	v, err := strconv.ParseFloat(StringView(n), 64)
	return v, err == nil
}

// bool consumes true, false or null (false).
func (sc *scanner) bool() (v, ok bool) {
	switch {
	case sc.lit("true"):
		return true, true
	case sc.lit("false"), sc.lit("null"):
		return false, true
	}
	return false, false
}

// raw consumes any value and returns it, its capacity capped.
func (sc *scanner) raw() (json.RawMessage, bool) {
	v, ok := sc.value()
	return v[:len(v):len(v)], ok
}

// json consumes null (present false) or any other value, which it
// decodes into v with encoding/json.
func (sc *scanner) json(v any) (present, ok bool) {
	if sc.lit("null") {
		return false, true
	}
	raw, ok := sc.value()
	return true, ok && json.Unmarshal(raw, v) == nil
}
