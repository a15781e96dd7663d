package capture

import (
	"encoding/json"
	"testing"

	"github.com/hindsight-proxy/hindsight/wire"
)

// decodingRedactor is r with cleanJSON made to decode every escaped
// string, as it did before it searched escapedText tokens as they stand:
// the reference the raw search is held to.
func decodingRedactor(r *Redactor) *Redactor {
	ref, kw := *r, *r.keywords
	for i := range kw.inKeyword {
		kw.inKeyword[i] = true
	}
	ref.keywords = &kw
	return &ref
}

// cleanJSONCases are documents whose escaped strings hide keywords or
// documents in the places the raw search must not miss.
var cleanJSONCases = []string{
	`{"text":"line one\ntoken=abc"}`,
	`{"text":"a\\\"password\" b"}`,
	`{"text":"tab\tAuthorization: x"}`,
	`{"text":"\n {\"api_key\":\"abc\"}"}`,
	`{"text":"\t[\"Bearer abcdefgh12345678\"]"}`,
	`{"text":"\/\/ ghp_ in a comment\n"}`,
	`{"text":"to\nken"}`,
	`{"text":"\"\\u0074oken\""}`,
	`{"text":"x\r\n  \"y\"\f"}`,
	`{"tok\nen":"x"}`,
}

// TestCleanJSONRawSearch holds cleanJSON, which searches escaped ASCII
// strings without decoding them, to the same search on decoded strings: it
// may take the full path more often, never less.
// rawSearchDocs are the documents the raw-search tests run on: the cases,
// the secrets corpus (as it stands and held in a string) and the typical
// payloads.
func rawSearchDocs(t testing.TB) [][]byte {
	docs := [][]byte{}
	for _, d := range cleanJSONCases {
		docs = append(docs, []byte(d))
	}
	for _, c := range loadCorpus(t) {
		msg, _ := json.Marshal(string(c.Message))
		docs = append(docs, c.Message, []byte(`{"text":`+string(msg)+`}`))
	}
	for _, p := range typicalPayloads() {
		docs = append(docs, p)
	}
	return docs
}

func TestCleanJSONRawSearch(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ref := decodingRedactor(r)
	for _, d := range rawSearchDocs(t) {
		if !wire.Valid(d) {
			t.Fatalf("not JSON: %s", d)
		}
		got, want := r.cleanJSON(d, 0, false), ref.cleanJSON(d, 0, false)
		if got && !want {
			t.Errorf("cleanJSON passed %s, which the decoding search does not", d)
		}
	}
	for _, d := range []string{`{"text":"line one\ntoken=abc"}`, `{"text":"\n {\"api_key\":\"abc\"}"}`, `{"text":"to\nken"}`} {
		if d != `{"text":"to\nken"}` && r.cleanJSON([]byte(d), 0, false) {
			t.Errorf("cleanJSON passed %s", d)
		}
	}
	if !r.cleanJSON([]byte(`{"text":"to\nken"}`), 0, false) {
		t.Error(`cleanJSON found a keyword across an escape: "to\nken"`)
	}
}

// FuzzCleanJSONRawSearch holds the raw search to the decoding one on any
// document.
func FuzzCleanJSONRawSearch(f *testing.F) {
	for _, d := range cleanJSONCases {
		f.Add(d)
	}
	f.Add(`"0123456789abcdef\\\"0123456789\u00e9 \n"`)
	r, err := NewRedactor(RedactorConfig{})
	if err != nil {
		f.Fatal(err)
	}
	ref := decodingRedactor(r)
	f.Fuzz(func(t *testing.T, doc string) {
		if !wire.Valid([]byte(doc)) {
			return
		}
		if tok := []byte(doc); tok[0] == '"' {
			if got, want := func() int { e, _ := r.keywords.scanString(tok, 0); return e }(), stringEnd(tok, 0); got != want {
				t.Fatalf("scanString(%q) ends at %d, stringEnd at %d", doc, got, want)
			}
		}
		if r.cleanJSON([]byte(doc), 0, false) && !ref.cleanJSON([]byte(doc), 0, false) {
			t.Fatalf("cleanJSON passed %q, which the decoding search does not", doc)
		}
	})
}
