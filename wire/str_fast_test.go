package wire

import (
	"math/bits"
	"strings"
	"testing"
	"unicode/utf8"
)

// appendEscapedPlain is appendEscaped a byte at a time, as it was before
// it skipped eight bytes at once: the reference the fast path is held to.
func appendEscapedPlain(b []byte, s string, e *escapes) []byte {
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
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			start = i + size
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// TestMayEscape8 checks mayEscape8's first marked byte for every byte value
// at every place in a word of plain bytes, and after another marked byte.
func TestMayEscape8(t *testing.T) {
	marked := func(c byte) bool { return c < 0x20 || c >= 0x7f || strings.IndexByte(`"\<>&`, c) >= 0 }
	for c := range 256 {
		for p := range 8 {
			w := []byte("abcdefgh")
			w[p] = byte(c)
			x := uint64(0)
			for i := range 8 {
				x |= uint64(w[i]) << (8 * i)
			}
			m := mayEscape8(x)
			switch {
			case !marked(byte(c)) && m != 0:
				t.Errorf("mayEscape8 marks %q", w)
			case marked(byte(c)) && (m == 0 || bits.TrailingZeros64(m)>>3 != p):
				t.Errorf("mayEscape8(%q) = %#x, want its first mark at byte %d", w, m, p)
			}
			for q := p + 1; q < 8; q++ { // a byte after a marked one
				w2 := append([]byte(nil), w...)
				w2[q] = 0xff
				x2 := x | 0xff<<(8*q)
				first := q
				if marked(byte(c)) {
					first = p
				}
				if m := mayEscape8(x2); m == 0 || bits.TrailingZeros64(m)>>3 != first {
					t.Errorf("mayEscape8(%q) = %#x", w2, m)
				}
			}
		}
	}
}

// FuzzAppendEscapedFast holds appendEscaped to the byte-at-a-time
// reference, for both escapers.
func FuzzAppendEscapedFast(f *testing.F) {
	for _, s := range []string{"", "plain text longer than eight", "<a&b> and \"quoted\" \\ back", "\x00\x1f\x7f 0123456789",
		"\u2028\u2029 twelve bytes", "bad\xff\xfe in a longer run", "é漢字🙂 mixed with ASCII text"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, e := range []*escapes{&jsonEscapes, &plainEscapes} {
			if got, want := appendEscaped(nil, s, e), appendEscapedPlain(nil, s, e); string(got) != string(want) {
				t.Fatalf("appendEscaped(%q) = %s, byte at a time: %s", s, got, want)
			}
		}
	})
}

// BenchmarkAppendString measures escaping strings of the lengths a step
// holds: a server name, a session id, a text of 256 bytes.
func BenchmarkAppendString(b *testing.B) {
	buf := make([]byte, 0, 512)
	for name, s := range map[string]string{"short": "fs", "session": "3f2a9c1e-5b7d-4e8f-a0b1-c2d3e4f5a6b7",
		"text256": strings.Repeat("hindsight ", 26)[:256]} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendString(buf[:0], s)
			}
		})
	}
}
