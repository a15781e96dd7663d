package proxy

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
)

func TestSpecial8(t *testing.T) {
	naive := func(b []byte) bool {
		for _, c := range b {
			if c < 0x20 || c == '"' || c == '\\' {
				return true
			}
		}
		return false
	}
	cases := []string{"abcdefgh", "abcdefg\"", "\\bcdefgh", "abc\x1fefgh", "\xff\xfe\x80\x7f !#[", "        ",
		"\x20\x21\x5b\x5d\xc3\xa9\xe2\x82", "aaaa\x00aaa", "\"\"\"\"\"\"\"\"", "\x21\x21\x21\x21\x21\x21\x21\x1f"}
	for c := range 256 { // every byte in every position
		for pos := range 8 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			cases = append(cases, string(b))
		}
	}
	for _, c := range cases {
		if got, want := special8(binary.LittleEndian.Uint64([]byte(c))), naive([]byte(c)); got != want {
			t.Errorf("special8(%q) = %v, want %v", c, got, want)
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
