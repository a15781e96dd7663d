package capture

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hindsight-proxy/hindsight/wire"
)

type corpusCase struct {
	Name           string          `json:"name"`
	Kind           string          `json:"kind"`
	MustNotContain []string        `json:"must_not_contain"`
	Message        json.RawMessage `json:"message"`
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	b, err := os.ReadFile("testdata/secrets/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Kinds int          `json:"kinds"`
		Cases []corpusCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Kinds < 30 {
		t.Fatalf("corpus has %d kinds, want at least 30", c.Kinds)
	}
	return c.Cases
}

var (
	testRedactorOnce sync.Once
	testRedactorVal  *Redactor
)

func testRedactor(t testing.TB) *Redactor {
	t.Helper()
	testRedactorOnce.Do(func() {
		r, err := NewRedactor(RedactorConfig{
			Keys:     []string{"X-Internal-Ticket"},
			Patterns: []Pattern{{Name: "employee-id", Regex: `\bEMP-(\d{6})\b`}},
		})
		if err != nil {
			panic(err)
		}
		testRedactorVal = r
	})
	return testRedactorVal
}

// TestRedactCorpus plants every fake secret of the corpus in arguments,
// results, error messages and nested JSON: none may survive.
func TestRedactCorpus(t *testing.T) {
	r := testRedactor(t)
	kinds := map[string]bool{}
	for _, c := range loadCorpus(t) {
		kinds[c.Kind] = true
		t.Run(c.Name, func(t *testing.T) {
			out, n := r.Redact(c.Message)
			if !json.Valid(out) {
				t.Fatalf("output is not JSON: %s", out)
			}
			if n == 0 {
				t.Errorf("no redaction counted")
			}
			for _, s := range c.MustNotContain {
				if strings.Contains(string(out), s) || strings.Contains(string(out), jsonEscaped(s)) {
					t.Errorf("secret %.12s… survived in %s", s, out)
				}
			}
			// Redacting again finds nothing new.
			again, n2 := r.Redact(out)
			if n2 != 0 || string(again) != string(out) {
				t.Errorf("second pass redacted %d more: %s", n2, again)
			}
		})
	}
	if len(kinds) < 30 {
		t.Errorf("corpus covers %d kinds", len(kinds))
	}
}

// TestRedactCorpusEchoed sends each corpus message the way an echo tool
// sees it: as a JSON string argument, and back inside result text after a
// prefix (text holding escaped JSON, not JSON).
func TestRedactCorpusEchoed(t *testing.T) {
	r := testRedactor(t)
	for _, c := range loadCorpus(t) {
		msg, _ := json.Marshal(string(c.Message))
		req := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":` + string(msg) + `}}}`
		text, _ := json.Marshal("Echo: " + string(c.Message))
		resp := `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":` + string(text) + `}]}}`
		for _, in := range []string{req, resp} {
			out, _ := r.Redact([]byte(in))
			if !json.Valid(out) {
				t.Fatalf("%s: invalid JSON", c.Name)
			}
			for _, s := range c.MustNotContain {
				if strings.Contains(string(out), s) {
					t.Errorf("%s: secret %.10s… survived", c.Name, s)
				}
			}
		}
	}
}

// TestCleanJSON holds the redactor's fast path to the full one: a document
// cleanJSON passes must be one redactJSON leaves alone, and every corpus
// message, bare or echoed, must take the full path.
func TestCleanJSON(t *testing.T) {
	r, err := NewRedactor(RedactorConfig{Keys: []string{"X-Internal-Ticket"}})
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, c := range loadCorpus(t) {
		msg, _ := json.Marshal(string(c.Message))
		docs = append(docs, c.Message,
			[]byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":`+string(msg)+`}}}`))
	}
	for _, d := range docs {
		if _, n := r.redactJSON(d, 0, found{}); n > 0 && r.cleanJSON(d, 0, false) {
			t.Errorf("cleanJSON passed a document with %d secrets: %s", n, d)
		}
	}
	for name, p := range typicalPayloads() {
		if !r.cleanJSON(p, 0, false) {
			t.Errorf("%s: a payload without secrets takes the full path", name)
		}
	}
	for _, tc := range []struct {
		doc   string
		clean bool
	}{
		{`{"a":"b","n":[1,2,{"c":null}]}`, true},
		{`{"Password":"hunter2"}`, false},
		{`{"x-internal-ticket":42}`, false},
		{`{"progressToken":7}`, true},
		{`{"text":"{\"api_key\":\"abc\"}"}`, false},
		{`{"text":"Bearer abcdefgh12345678"}`, false},
		{`{"\u0074oken":"x"}`, false},
		// A document in a string is searched as a whole, and its escaped
		// strings once more, decoded.
		{`{"text":"{\"a\":\"\\u0074oken\"}"}`, false},
		{`{"text":"{\"a\":\"b\\n\"}"}`, true},
		{`"plain words only"`, true},
	} {
		if got := r.cleanJSON([]byte(tc.doc), 0, false); got != tc.clean {
			t.Errorf("cleanJSON(%s) = %v, want %v", tc.doc, got, tc.clean)
		}
	}
}

func TestKeywordInLeaf(t *testing.T) {
	for k, want := range map[string]bool{"ghp_": true, "private key": true, "://": true, "key:": false, "a: b": false, " key": false, "a\nb": false} {
		if got := keywordInLeaf(k); got != want {
			t.Errorf("keywordInLeaf(%q) = %v, want %v", k, got, want)
		}
	}
}

func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestRedactPlaceholders(t *testing.T) {
	r := testRedactor(t)
	cases := []struct {
		name, in, want string
		n              int
	}{
		{"github pat typed", `{"text":"use ghp_Zx81kq0LmN3vB7cR2tY5wP9sD4fG6hJ1kL0a"}`,
			`{"text":"use [REDACTED:github-pat]"}`, 1},
		{"password key any depth", `{"a":{"b":[{"Password":"hunter2"}]}}`,
			`{"a":{"b":[{"Password":"[REDACTED:key:password]"}]}}`, 1},
		{"key separators normalised", `{"API-Key":"abc","client_secret":"x1","refreshToken":"r"}`,
			`{"API-Key":"[REDACTED:key:apikey]","client_secret":"[REDACTED:key:clientsecret]","refreshToken":"[REDACTED:key:refreshtoken]"}`, 3},
		{"sensitive subtree and number", `{"credentials":{"user":"bob","pin":1234},"n":5}`,
			`{"credentials":{"user":"[REDACTED:key:credentials]","pin":"[REDACTED:key:pin]"},"n":5}`, 2},
		{"progress token kept", `{"_meta":{"progressToken":"abc-123-def-456"},"nextPageToken":"p2"}`,
			`{"_meta":{"progressToken":"abc-123-def-456"},"nextPageToken":"p2"}`, 0},
		{"layout kept", "{ \"token\" : \"t0k3n\",\n  \"ok\": true }",
			"{ \"token\" : \"[REDACTED:key:token]\",\n  \"ok\": true }", 1},
		{"user key", `{"x_internal_ticket":"T-99"}`, `{"x_internal_ticket":"[REDACTED:key:xinternalticket]"}`, 1},
		{"user pattern group", `{"who":"EMP-123456 asked"}`, `{"who":"EMP-[REDACTED:employee-id] asked"}`, 1},
		{"bearer in text", `curl -H "Authorization: Bearer abcdefgh12345678" x`,
			`curl -H "Authorization: Bearer [REDACTED:curl-auth-header]" x`, 1},
		{"kv in text", `login failed for bob: password=s3cr3t!x`,
			`login failed for bob: password=[REDACTED:key:password]`, 1},
		{"url password", `dial postgres://app:pa55word@db:5432/x`, `dial postgres://app:[REDACTED:url-password]@db:5432/x`, 1},
		{"embedded json", `{"text":"{\"password\":\"pw1\"}"}`, `{"text":"{\"password\":\"[REDACTED:key:password]\"}"}`, 1},
		{"prose untouched", `{"text":"basic authentication failed: the token expired"}`,
			`{"text":"basic authentication failed: the token expired"}`, 0},
		{"secret as progress token", `{"_meta":{"progressToken":"ghp_Zx81kq0LmN3vB7cR2tY5wP9sD4fG6hJ1kL0a"}}`,
			`{"_meta":{"progressToken":"[REDACTED:github-pat]"}}`, 1},
		{"schemas keep property names", `{"tools":[{"name":"login","inputSchema":{"type":"object","properties":{"password":{"type":"string","description":"the user's password"}}}}]}`,
			`{"tools":[{"name":"login","inputSchema":{"type":"object","properties":{"password":{"type":"string","description":"the user's password"}}}}]}`, 0},
		{"env reference kept", `{"text":"const apiKey = process.env.API_KEY; password=$DB_PASSWORD"}`,
			`{"text":"const apiKey = process.env.API_KEY; password=$DB_PASSWORD"}`, 0},
		{"escaped json in text", `{"text":"log: {\\\"password\\\": \\\"hunter22\\\"}"}`,
			`{"text":"log: {\\\"password\\\": \\\"[REDACTED:key:password]\\\"}"}`, 1},
		{"max tokens untouched", `{"max_tokens":100,"input_tokens":7}`, `{"max_tokens":100,"input_tokens":7}`, 0},
		{"empty value", `{"password":""}`, `{"password":""}`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, n := r.Redact([]byte(c.in))
			if string(out) != c.want || n != c.n {
				t.Errorf("Redact(%s)\n got %s (%d)\nwant %s (%d)", c.in, out, n, c.want, c.n)
			}
		})
	}
}

func TestRedactBadPattern(t *testing.T) {
	if _, err := NewRedactor(RedactorConfig{Patterns: []Pattern{{Name: "x", Regex: "("}}}); err == nil {
		t.Error("bad regex accepted")
	}
	if _, err := NewRedactor(RedactorConfig{Patterns: []Pattern{{Regex: "x"}}}); err == nil {
		t.Error("unnamed pattern accepted")
	}
}

// FuzzRedact checks that redaction never panics, keeps JSON valid, and
// removes a planted secret wherever it lands.
func FuzzRedact(f *testing.F) {
	r := testRedactor(f)
	for _, c := range loadCorpus(f)[:12] {
		f.Add(string(c.Message), "")
	}
	f.Add(`{"a":"b"}`, "password")
	f.Add(`["x",1,{"k":[null,true]}]`, "token")
	f.Add(`not json at all`, "authorization")
	f.Add(`{"s":"\u2028\ud800"}`, "")
	const planted = "ghp_Qm7Tz2XcV9bN4kL8pR1sW6yH3jF5dA0gE2uI"
	plain, err := NewRedactor(RedactorConfig{}) // no patterns: Redact may take cleanJSON's fast path
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc, key string) {
		if wire.Valid([]byte(doc)) && plain.cleanJSON([]byte(doc), 0, false) {
			if _, n := plain.redactJSON([]byte(doc), 0, found{}); n > 0 {
				t.Fatalf("cleanJSON passed a document redactJSON changes %d times: %s", n, doc)
			}
		}
		out, _ := r.Redact([]byte(doc))
		if json.Valid([]byte(doc)) && !json.Valid(out) {
			t.Fatalf("valid JSON became invalid: %q → %q", doc, out)
		}
		// Plant a secret as a value under key, inside the fuzzed document.
		if !json.Valid([]byte(doc)) {
			return
		}
		k, _ := json.Marshal(key)
		planted := `{"wrap":` + doc + `,` + string(k) + `:"` + planted + `"}`
		out, _ = r.Redact([]byte(planted))
		if strings.Contains(string(out), planted[len(planted)-42:len(planted)-2]) {
			t.Fatalf("planted secret survived: %s", out)
		}
	})
}

// FuzzDecodeJSONString checks the string decoder against encoding/json.
func FuzzDecodeJSONString(f *testing.F) {
	for _, s := range []string{`"a"`, `"\n\t\"\\\/"`, `"\u00e9\ud83d\ude00"`, `"\ud800x"`, `"\udc00\ud800"`, `"\u0041\u2028"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		var want string
		if json.Unmarshal([]byte(tok), &want) != nil || len(tok) < 2 || tok[0] != '"' || stringEnd([]byte(tok), 0) != len(tok)-1 {
			return // not exactly one string token, as collect hands over
		}
		if got := decodeJSONString([]byte(tok)); got != want {
			t.Fatalf("decode %q = %q, want %q", tok, got, want)
		}
	})
}
