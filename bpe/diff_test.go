package bpe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// names are the encodings Load builds.
var names = []string{"cl100k_base", "o200k_base"}

// pair is one encoding of ours and tiktoken-go's, which it must equal.
type pair struct {
	ours *Encoder
	ref  *tiktoken.Tiktoken
}

var (
	pairsMu sync.Mutex
	pairs   = map[string]pair{}
)

// encoders returns the shared Encoder of name and tiktoken-go's.
func encoders(tb testing.TB, name string) (*Encoder, *tiktoken.Tiktoken) {
	tb.Helper()
	pairsMu.Lock()
	defer pairsMu.Unlock()
	if p, ok := pairs[name]; ok {
		return p.ours, p.ref
	}
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	ref, err := tiktoken.GetEncoding(name)
	if err != nil {
		tb.Fatal(err)
	}
	ours, err := Load(name)
	if err != nil {
		tb.Fatal(err)
	}
	pairs[name] = pair{ours, ref}
	return ours, ref
}

// same fails tb unless Encoder and the reference agree on s: tokens,
// count and decoding.
func same(tb testing.TB, e *Encoder, r *tiktoken.Tiktoken, s string) {
	tb.Helper()
	want := r.EncodeOrdinary(s)
	if got := e.Encode(s); !slices.Equal(got, want) {
		tb.Fatalf("%s: Encode(%q) = %v, tiktoken-go %v", e.Name(), s, got, want)
	}
	if got := e.Count(s); got != len(want) {
		tb.Fatalf("%s: Count(%q) = %d, tiktoken-go %d", e.Name(), s, got, len(want))
	}
	if got, w := e.Decode(want), r.Decode(want); got != w {
		tb.Fatalf("%s: Decode(%v) = %q, tiktoken-go %q", e.Name(), want, got, w)
	}
}

// corpus returns varied texts: the trace corpus (whole lines and every
// string in them), this repository's Go sources and READMEs, and made-up
// texts for unicode, code, whitespace runs, emoji and numbers.
func corpus(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, name := range []string{"traces.jsonl", "labels.jsonl"} {
		raw, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", name))
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			out = append(out, line)
			var v any
			if json.Unmarshal([]byte(line), &v) == nil {
				out = appendStrings(out, v)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join("..", "inject", "*.go"))
	more, _ := filepath.Glob(filepath.Join("..", "reflect", "*.go"))
	files = append(files, more...)
	files = append(files, filepath.Join("..", "README.md"), filepath.Join("..", "lab", "bench", "README.md"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, string(raw))
	}
	return append(out, madeUp()...)
}

// appendStrings appends every string within the JSON value v.
func appendStrings(out []string, v any) []string {
	switch v := v.(type) {
	case string:
		return append(out, v)
	case []any:
		for _, x := range v {
			out = appendStrings(out, x)
		}
	case map[string]any:
		for k, x := range v {
			out = appendStrings(append(out, k), x)
		}
	}
	return out
}

// madeUp returns texts that stress the pattern and the merging.
func madeUp() []string {
	out := []string{
		"", " ", "a", "\n", "\r\n", "…", "I'M HERE, YOU'LL SEE, IT'S 'Quoted'", "don't won't shan't y'all",
		"naïve café Ørsted Ελληνικά русский язык 中文分词测试 日本語のテキスト 한국어 텍스트 עברית العربية हिन्दी",
		"e\u0301 a\u0308 ZWJ 👩‍👩‍👧‍👦 flags 🇫🇷🇯🇵 skin 👍🏽 emoji 😀😃😄 🧑‍💻 ❤️ \u200b\u200d\ufeff",
		"3.14159 1,000,000 0x1F 1e-9 -42 1234567890123456789012345 ٣٤٥ ①② ½",
		"func main() {\n\tfmt.Println(\"hi\")\n}\n", "if (a && b || !c) { x += y >> 2; } // ok?!",
		"SELECT * FROM t WHERE id = '1'; -- comment\n", "<div class=\"x\">&amp;</div>", "path/to/file.go:12:3: error",
		"\x00\x01\x7f", "\xff\xfe invalid \xc3", "tab\tsep\tvalues\t\t\t", "trailing   ", "   leading", "\n\n\n\nx\n\n",
		strings.Repeat("a", 3000), strings.Repeat("ab ", 500), strings.Repeat("🙂", 200), strings.Repeat("9", 100),
		strings.Repeat("=", 257), strings.Repeat("\u00a0", 40), "ghp_" + strings.Repeat("A1b2", 10),
	}
	for _, ws := range []string{" ", "\t", "\n", "\r\n", " \n", "\u3000"} {
		for _, n := range []int{1, 2, 3, 7, 16, 33, 100} {
			out = append(out, strings.Repeat(ws, n), "x"+strings.Repeat(ws, n)+"y", strings.Repeat(ws, n)+"!")
		}
	}
	return out
}

// TestMatchesTiktoken holds each Encoder to tiktoken-go on the corpus.
func TestMatchesTiktoken(t *testing.T) {
	texts := corpus(t)
	if len(texts) < 1000 {
		t.Fatalf("only %d texts", len(texts))
	}
	t.Logf("%d texts", len(texts))
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			e, r := encoders(t, name)
			step := 1
			if raceEnabled {
				step = 16
			}
			for i := 0; i < len(texts); i += step {
				same(t, e, r, texts[i])
			}
		})
	}
}

// fuzzMatches holds the Encoder of name to tiktoken-go on any text.
func fuzzMatches(f *testing.F, name string) {
	for _, s := range madeUp() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, r := encoders(t, name)
		same(t, e, r, s)
	})
}

// FuzzMatchesTiktoken holds cl100k_base to tiktoken-go on any text.
func FuzzMatchesTiktoken(f *testing.F) { fuzzMatches(f, "cl100k_base") }

// FuzzMatchesTiktokenO200k holds o200k_base to tiktoken-go on any text.
func FuzzMatchesTiktokenO200k(f *testing.F) { fuzzMatches(f, "o200k_base") }

// TestDecodeSkipsUnknown checks that a token out of range decodes to
// nothing rather than panicking.
func TestDecodeSkipsUnknown(t *testing.T) {
	for _, name := range names {
		e, r := encoders(t, name)
		hello := r.EncodeOrdinary("hello")
		if got := e.Decode(append([]int{-1}, append(hello, 1<<30)...)); got != "hello" {
			t.Fatalf("%s: Decode = %q, want %q", name, got, "hello")
		}
	}
}

// TestLoadUnknown checks that Load refuses an encoding it does not build.
func TestLoadUnknown(t *testing.T) {
	if _, err := Load("p50k_base"); err == nil {
		t.Fatal("Load(p50k_base) succeeded")
	}
}
