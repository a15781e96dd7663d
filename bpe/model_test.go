package bpe

import (
	"fmt"
	"testing"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// TestForModelMatchesTiktoken checks ForModel against tiktoken-go's
// EncodingForModel: the same encoding for every model it maps to one Load
// builds, Default for the rest.
func TestForModelMatchesTiktoken(t *testing.T) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	models := []string{
		"gpt-4.5", "gpt-4.5-preview", "gpt-4.1", "gpt-4.1-2025-04-14", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini",
		"gpt-4o-2024-05-13", "gpt-4", "gpt-4-0314", "gpt-4-32k", "gpt-4-turbo", "gpt-3.5-turbo", "gpt-3.5-turbo-0301",
		"gpt-3.5-turbo-16k", "text-embedding-ada-002", "text-embedding-3-large", "text-embedding-3-small",
		"text-davinci-003", "text-davinci-001", "code-davinci-002", "text-davinci-edit-001", "davinci", "gpt2",
		"", "gpt-5", "o1", "o3-mini", "claude-3-5-sonnet", "llama3", "gpt-4o2", "GPT-4",
	}
	// tiktoken-go does not name the encoding it returns: tell it by the
	// tokens of a probe text.
	const probe = "Hello wörld 🙂 12345 'tis"
	probes := map[string]string{}
	for _, name := range names {
		e, _ := encoders(t, name)
		probes[fmt.Sprint(e.Encode(probe))] = name
	}
	for _, m := range models {
		want := Default
		if enc, err := tiktoken.EncodingForModel(m); err == nil {
			if name, built := probes[fmt.Sprint(enc.EncodeOrdinary(probe))]; built {
				want = name
			}
		}
		if got := ForModel(m); got != want {
			t.Errorf("ForModel(%q) = %s, want %s", m, got, want)
		}
	}
	// Every entry of the copied tables is one tiktoken-go knows.
	for m, name := range modelEncodings {
		if tiktoken.MODEL_TO_ENCODING[m] != name {
			t.Errorf("model %q: ours %s, tiktoken-go %s", m, name, tiktoken.MODEL_TO_ENCODING[m])
		}
	}
	for _, p := range prefixEncodings {
		if tiktoken.MODEL_PREFIX_TO_ENCODING[p.prefix] != p.encoding {
			t.Errorf("prefix %q: ours %s, tiktoken-go %s", p.prefix, p.encoding, tiktoken.MODEL_PREFIX_TO_ENCODING[p.prefix])
		}
	}
}
