package capture

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight/wire"
)

// plainCleanJSON is the search scanJSON replaced, run on documents
// wire.Valid passed: a lexical walk over the string tokens, each classified
// by plainScanString and decoded unless plain, escaped strings searched
// both as they stand and decoded. scanJSON is held to wire.Valid followed
// by it.
func (r *Redactor) plainCleanJSON(doc []byte, depth int, searched bool) bool {
	for i := 0; i < len(doc); i++ {
		if doc[i] != '"' {
			continue
		}
		end, kind := r.keywords.plainScanString(doc, i)
		key := isKeyAt(doc, end+1)
		if kind == escapedText && !key {
			if r.keywords.findASCII(wire.StringView(doc[i+1:end]), 0) != 0 {
				return false
			}
			if !mayHoldJSON(doc[i+1 : end]) {
				i = end
				continue
			}
		}
		plain := kind == plainText
		var s string
		if plain {
			s = wire.StringView(doc[i+1 : end])
		} else {
			s = decodeJSONString(doc[i : end+1])
		}
		i = end
		if key {
			if r.sensitiveKey(s) != "" || !(plain && searched) && !notSensitive[normalizeKey(s)] && r.keywords.findText(s, plain) != 0 {
				return false
			}
			continue
		}
		if !(plain && searched) && r.keywords.findText(s, plain) != 0 {
			return false
		}
		if t := strings.TrimSpace(s); depth < maxJSONDepth && len(t) > 1 && (t[0] == '{' || t[0] == '[') &&
			wire.Valid(wire.BytesView(t)) && !r.plainCleanJSON(wire.BytesView(t), depth+1, true) {
			return false
		}
	}
	return true
}

// plainScanString is scanString as it was before it validated: skipping
// blocks of eight plain bytes, then looking at bytes one by one.
func (x *keywordIndex) plainScanString(doc []byte, start int) (int, textKind) {
	var or byte
	kind := plainText
	for i := start + 1; i < len(doc); {
		for ; i+8 <= len(doc); i += 8 {
			const lo, hi = 0x0101010101010101, 0x8080808080808080
			w := binary.LittleEndian.Uint64(doc[i:])
			q, b := w^(lo*'"'), w^(lo*'\\')
			if (w|(q-lo)&^q|(b-lo)&^b)&hi != 0 {
				break
			}
		}
		for block := min(i+8, len(doc)); i < block; i++ {
			switch c := doc[i]; c {
			case '\\':
				if i+1 == len(doc) {
					return i, otherText
				}
				if d := unescaped[doc[i+1]]; d == 0 || x.inKeyword[d] {
					return stringEndFrom(doc, i), otherText
				}
				kind = escapedText
				i++
			case '"':
				if or >= utf8.RuneSelf {
					return i, otherText
				}
				return i, kind
			default:
				or |= c
			}
		}
	}
	return len(doc) - 1, otherText
}

// checkScanJSON fails t when scanJSON's verdict on doc disagrees with
// wire.Valid and plainCleanJSON, or scanString with plainScanString.
func checkScanJSON(t *testing.T, r *Redactor, doc []byte) {
	t.Helper()
	got, valid := r.scanJSON(doc, 0, false), wire.Valid(doc)
	switch {
	case got == docInvalid && valid:
		t.Fatalf("scanJSON calls %q invalid, wire.Valid does not", doc)
	case got == docClean && !valid:
		t.Fatalf("scanJSON calls %q clean, wire.Valid calls it invalid", doc)
	case valid && (got == docClean) != r.plainCleanJSON(doc, 0, false):
		t.Fatalf("scanJSON(%q) = %d, the plain search says clean=%v", doc, got, !(got == docClean))
	}
	if valid && len(doc) > 0 && doc[0] == '"' {
		e1, k1 := r.keywords.scanString(doc, 0)
		if e2, k2 := r.keywords.plainScanString(doc, 0); e1 != e2 || k1 != k2 {
			t.Fatalf("scanString(%q) = %d, %d; plainScanString: %d, %d", doc, e1, k1, e2, k2)
		}
	}
}

// scanJSONDocs are documents for the scanJSON tests: the raw-search cases,
// the secrets corpus (as it stands and held in a string) and the typical
// payloads.
func scanJSONDocs(t testing.TB) [][]byte {
	return append(rawSearchDocs(t), []byte(` [1, -2.5e3, true, false, null, {"a": {}}, []] `), []byte(`"\u00e9\ud83d\ude00"`),
		[]byte(`{"a":"b"} x`), []byte(`{"a" "b"}`), []byte(`{"a":"\x"}`), []byte("{\"a\":\"\x01\"}"), []byte(`[1,]`),
		[]byte(`{"t":"\u000b{\"x-internal-ticket\":\"abc\"}"}`), []byte(`{"t":"\u00a0[{\"x-internal-ticket\":1}]"}`),
		[]byte(`{"t":"\t {\"x-internal-ticket\":2}"}`), []byte(`{"t":"x{\"x-internal-ticket\":2}"}`),
		[]byte(`{"a":1,}`), []byte(`{,}`), []byte(`[01]`), []byte(`{"a":tru}`), []byte(`"\u12"`), []byte(``), []byte(`  `))
}

// TestScanJSONAgrees holds scanJSON to wire.Valid and the plain search on
// the test documents, every prefix of the shorter ones and each with one
// byte changed at a few places.
func TestScanJSONAgrees(t *testing.T) {
	r := testRedactor(t)
	for _, d := range scanJSONDocs(t) {
		checkScanJSON(t, r, d)
		if len(d) > 400 {
			continue
		}
		for n := range len(d) {
			checkScanJSON(t, r, d[:n])
			for _, c := range []byte{'"', '\\', '}', ',', 0x01, 0xe9} {
				m := append([]byte(nil), d...)
				m[n] = c
				checkScanJSON(t, r, m)
			}
		}
	}
}

// FuzzScanJSON holds scanJSON to wire.Valid and the plain search on any
// input.
func FuzzScanJSON(f *testing.F) {
	for _, d := range scanJSONDocs(f) {
		if len(d) < 2000 {
			f.Add(string(d))
		}
	}
	r := testRedactor(f)
	f.Fuzz(func(t *testing.T, doc string) {
		checkScanJSON(t, r, []byte(doc))
	})
}

// TestASCIISpace holds asciiSpace to unicode.IsSpace, which
// strings.TrimSpace trims.
func TestASCIISpace(t *testing.T) {
	for c := range utf8.RuneSelf {
		if asciiSpace[c] != unicode.IsSpace(rune(c)) {
			t.Errorf("asciiSpace[%q] = %v", rune(c), asciiSpace[c])
		}
	}
}
