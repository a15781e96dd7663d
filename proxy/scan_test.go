package proxy

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strings"
	"testing"
)

func TestSpecial8(t *testing.T) {
	// naive returns the index of the first special byte, or 8.
	naive := func(b []byte) int {
		for i, c := range b {
			if c < 0x20 || c == '"' || c == '\\' {
				return i
			}
		}
		return 8
	}
	cases := []string{"abcdefgh", "abcdefg\"", "\\bcdefgh", "abc\x1fefgh", "\xff\xfe\x80\x7f !#[", "        ",
		"\x20\x21\x5b\x5d\xc3\xa9\xe2\x82", "aaaa\x00aaa", "\"\"\"\"\"\"\"\"", "\x21\x21\x21\x21\x21\x21\x21\x1f"}
	for c := range 256 { // every byte in every position, alone and before others
		for pos := range 8 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			cases = append(cases, string(b))
			for _, after := range []byte{0, '"', '\\', 0x1f, 0x21, 0xff} {
				for q := pos + 1; q < 8; q++ {
					b2 := []byte(string(b))
					b2[q] = after
					cases = append(cases, string(b2))
				}
			}
		}
	}
	for _, c := range cases {
		// The lowest flagged byte is the first special one.
		m := special8(binary.LittleEndian.Uint64([]byte(c)))
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if want := naive([]byte(c)); got != want {
			t.Errorf("special8(%q) flags byte %d first, want %d", c, got, want)
		}
	}
}

// FuzzValidJSON checks validJSON against encoding/json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"\u00e9 long enough to take the fast path"}]}`, `[1 2]`, `{"a":1 "b":2}`,
		`{"a"}`, `[-]`, `[1e+]`, `-01`, `"abcdefgh\"ijklmnop"`, "\"abcdefghij\x01klmnop\"", `[[[[{}]]]]`, `{"":""}`,
		strings.Repeat("[", 40) + strings.Repeat("]", 40)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}
