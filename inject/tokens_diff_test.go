package inject

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// reference adapts tiktoken-go, the tokenizer the product used before, to
// tokenizer.
type reference struct{ *tiktoken.Tiktoken }

func (r reference) Encode(s string) []int { return r.EncodeOrdinary(s) }
func (r reference) Count(s string) int    { return len(r.EncodeOrdinary(s)) }

func referenceTokenizer(tb testing.TB) reference {
	tb.Helper()
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	r, err := tiktoken.GetEncoding(Encoding)
	if err != nil {
		tb.Fatal(err)
	}
	return reference{r}
}

// truncationTexts returns every string of the trace corpus that is more
// than a few tokens long, and texts of multi-byte tokens and whitespace.
func truncationTexts(tb testing.TB) []string {
	tb.Helper()
	raw, err := os.ReadFile("../testdata/corpus/traces.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if len(v) > 20 && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		var v any
		if json.Unmarshal([]byte(line), &v) == nil {
			walk(v)
		}
	}
	return append(out,
		"中文分词测试 日本語のテキスト 한국어 텍스트 emoji 👩‍👩‍👧‍👦🇫🇷👍🏽 and more text after it",
		"Use   the\t\ttool    with\n\n\n   care: 1234567890 ÷ 3.14159 ≈ 393.0",
		strings.Repeat("é", 60), strings.Repeat("🙂 ", 30), "- "+strings.Repeat("word ", 80))
}

// TestTruncateMatchesReference checks that counts and cuts with the
// product's tokenizer equal those with tiktoken-go on the corpus, at caps
// from one token to more than the text.
func TestTruncateMatchesReference(t *testing.T) {
	ours, err := encoder()
	if err != nil {
		t.Fatal(err)
	}
	ref := referenceTokenizer(t)
	texts := truncationTexts(t)
	if len(texts) < 500 {
		t.Fatalf("only %d texts", len(texts))
	}
	for _, s := range texts {
		if got, want := ours.Count(s), ref.Count(s); got != want {
			t.Fatalf("count of %q: %d, tiktoken-go %d", s, got, want)
		}
		for _, max := range []int{1, 2, 3, 5, 8, 13, 40, 120} {
			if got, want := truncate(ours, s, max), truncate(ref, s, max); got != want {
				t.Fatalf("truncate(%q, %d) = %q, tiktoken-go %q", s, max, got, want)
			}
		}
	}
}

// FuzzTruncateMatchesReference compares counts and cuts with tiktoken-go on
// any text and cap.
func FuzzTruncateMatchesReference(f *testing.F) {
	f.Add("Use   the\t\ttool    with\n\n\n   care: 1234567890 ÷ 3.14159", 5)
	f.Add("中文分词测试 👩‍👩‍👧‍👦🇫🇷 emoji", 3)
	f.Add("\xff\xfe invalid \xc3 bytes", 2)
	ours, err := encoder()
	if err != nil {
		f.Fatal(err)
	}
	ref := referenceTokenizer(f)
	f.Fuzz(func(t *testing.T, s string, max int) {
		max = max%200 + 1
		if max <= 0 {
			max += 200
		}
		if got, want := ours.Count(s), ref.Count(s); got != want {
			t.Fatalf("count of %q: %d, tiktoken-go %d", s, got, want)
		}
		if got, want := truncate(ours, s, max), truncate(ref, s, max); got != want {
			t.Fatalf("truncate(%q, %d) = %q, tiktoken-go %q", s, max, got, want)
		}
	})
}
