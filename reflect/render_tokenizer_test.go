package reflect

import (
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// TestNewTokenizerCountsLikeTiktoken checks that NewTokenizer counts as
// tiktoken-go's encoding for the model does, o200k_base for models it does
// not know, and shares one tokenizer per encoding.
func TestNewTokenizerCountsLikeTiktoken(t *testing.T) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	// cl100k_base and o200k_base count this text differently.
	const text = "naïve café 中文分词测试 日本語のテキスト русский язык EACCES on /var/run/docker.sock\n\tx := f(1234)"
	want := map[string]int{}
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		e, err := tiktoken.GetEncoding(name)
		if err != nil {
			t.Fatal(err)
		}
		want[name] = len(e.EncodeOrdinary(text))
	}
	if want["cl100k_base"] == want["o200k_base"] {
		t.Fatalf("both encodings count %d tokens: the text tells nothing", want["o200k_base"])
	}
	for model, name := range map[string]string{
		"gpt-4": "cl100k_base", "gpt-3.5-turbo-0125": "cl100k_base", "gpt-4o-mini": "o200k_base",
		"gpt-4.1": "o200k_base", "": "o200k_base", "claude-sonnet-4": "o200k_base", "llama3.1:8b": "o200k_base",
	} {
		tok, err := NewTokenizer(model)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Count(text); got != want[name] {
			t.Errorf("NewTokenizer(%q).Count = %d, want %s's %d", model, got, name, want[name])
		}
	}
	a, _ := NewTokenizer("gpt-4o")
	b, _ := NewTokenizer("some-local-model")
	if a != b {
		t.Error("two models of o200k_base got two tokenizers")
	}
}
