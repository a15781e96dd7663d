package wire

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strings"
	"testing"
)

func TestSpecial8Words(t *testing.T) {
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

// FuzzValidJSON checks Valid against encoding/json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"\u00e9 long enough to take the fast path"}]}`, `[1 2]`, `{"a":1 "b":2}`,
		`{"a"}`, `[-]`, `[1e+]`, `-01`, `"abcdefgh\"ijklmnop"`, "\"abcdefghij\x01klmnop\"", `[[[[{}]]]]`, `{"":""}`,
		strings.Repeat("[", 40) + strings.Repeat("]", 40),
		`{}`, `[1,2.5e-3,-0,"a\u00e9\n"]`, `{"a":{"b":[true,false,null]}}`, `01`, `1.`, `"\x"`, `"a` + "\x01" + `"`,
		` {"a" : 1 } `, `{"a":1,}`, `[`, `"\ud800"`, "\"\xff\"", `-`, `1e+`, `tru`, `{"a":"b"}x`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := json.Valid(data)
		if got := Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
		i := SkipSpace(data, 0)
		end, deep, ok := SkipDeep(data, i, 0)
		if got := ok && !deep && SkipSpace(data, end) == len(data); got != want {
			t.Fatalf("SkipDeep(%q) = %d, %v, %v; encoding/json says %v", data, end, deep, ok, want)
		}
		if vEnd, vOK := SkipValue(data, i, 0); ok && !deep && (!vOK || vEnd != end) {
			t.Fatalf("SkipDeep(%q) ends at %d, SkipValue at %d, %v", data, end, vEnd, vOK)
		}
	})
}

// TestSkipDeep: SkipDeep follows a value past MaxNesting, counting the
// levels around it, and tells too deep from invalid.
func TestSkipDeep(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	objects := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, c := range []struct {
		in          string
		depth       int
		tooDeep, ok bool
	}{
		{nested(MaxNesting), 0, false, true},
		{nested(MaxNesting), 1, true, true},
		{nested(MaxNesting + 1), 0, true, true},
		{objects(MaxNesting + 1), 0, true, true},
		{"[" + nested(MaxNesting) + `,"x",{"b":[]}]`, 0, true, true},
		{nested(MaxNesting + 1)[:2*MaxNesting+1], 0, false, false},
		{"[" + nested(MaxNesting) + ",]", 0, false, false},
		{`[1,{"a":2}]`, MaxNesting - 2, false, true},
	} {
		end, tooDeep, ok := SkipDeep([]byte(c.in), 0, c.depth)
		if tooDeep != c.tooDeep || ok != c.ok || ok && end != len(c.in) {
			t.Errorf("SkipDeep(%.30q…, %d) = %d, %v, %v; want %v, %v", c.in, c.depth, end, tooDeep, ok, c.tooDeep, c.ok)
		}
		if _, vOK := SkipValue([]byte(c.in), 0, c.depth); vOK != (c.ok && !c.tooDeep) {
			t.Errorf("SkipValue(%.30q…, %d) = %v", c.in, c.depth, vOK)
		}
	}
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`0`, `-0`, `01`, `1.`, `.5`, `1e5`, `1E+5`, `1e`, `-`, `+1`, `1.5e-3`, `0x10`, `NaN`, `Infinity`,
		`"\u00e9"`, `"\u00G9"`, `"\x"`, `"\/"`, "\"\t\"", "\"\x01\"", "\"\xff\xfe\"", `"\ud800"`,
		`true`, `tru`, `null`, `nul`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1}{"b":2}`,
		" \t\r\n{} ", "\v{}", "{}\x00", `[[[]]]`, `[[[]]`, `{"a":[{"b":{"c":[]}}]}`, `""`, `"`, ``, ` `,
	} {
		if got, want := Valid([]byte(in)), json.Valid([]byte(in)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", in, got, want)
		}
	}
}

// TestValidLarge holds Valid to json.Valid on documents over 16 KiB, with
// a thousand levels of nesting and ten thousand (capture validated these
// with gjson below such sizes and json.Valid above them).
func TestValidLarge(t *testing.T) {
	const (
		size  = 16 << 10
		depth = 1 << 10
	)
	text := strings.Repeat("words and \\\"quotes\\\" {[", 1000)
	deep := strings.Repeat("[", depth) + `"` + strings.Repeat("x", size) + `"` + strings.Repeat("]", depth)
	deeper := strings.Repeat("[", 10*depth) + strings.Repeat("]", 10*depth)
	for _, d := range []string{
		`{"text":"` + text + `"}`,
		`{"text":"` + text + `"`,
		`{"text":"` + text + "\x01" + `"}`,
		`{"text":"` + strings.Repeat("words \\\"quoted\\\"\\n", 1000) + `"}`,
		`{"text":"` + strings.Repeat("words \\\"quoted\\\"\\n", 1000) + `\x"}`,
		`[` + strings.Repeat(`{"a":1},`, 3000) + `{"b":2}]`,
		`[` + strings.Repeat(`{"a":1},`, 3000) + `]`,
		deep, deep[1:], deeper, deeper + "]",
	} {
		if len(d) <= size {
			t.Fatalf("a test document of %d bytes", len(d))
		}
		if got, want := Valid([]byte(d)), json.Valid([]byte(d)); got != want {
			t.Errorf("Valid(%.40q…) = %v, json.Valid %v", d, got, want)
		}
	}
}

// FuzzSkipStringASCII holds SkipStringASCII to SkipString and a look at
// every byte of the token.
func FuzzSkipStringASCII(f *testing.F) {
	for _, s := range []string{`"plain"`, `"0123456789abcdefé"`, `"é"`, `"abc\"def\u00e9ghijklmnop"`, "\"\x01\"", `"abcdefgh\`, `"abcdefg` + "\xff" + `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if len(b) == 0 || b[0] != '"' {
			return
		}
		end, esc, ascii, ok := SkipStringASCII(b, 0)
		end2, esc2, ok2 := SkipString(b, 0)
		if end != end2 || esc != esc2 || ok != ok2 {
			t.Fatalf("SkipStringASCII(%q) = %d, %v, %v; SkipString: %d, %v, %v", s, end, esc, ok, end2, esc2, ok2)
		}
		if !ok {
			return
		}
		want := true
		for _, c := range b[1 : end-1] {
			want = want && c < 0x80
		}
		if ascii != want {
			t.Fatalf("SkipStringASCII(%q) says ascii=%v", s, ascii)
		}
	})
}
