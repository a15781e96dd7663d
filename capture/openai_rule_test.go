package capture

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// randomKey is n bytes drawn from alphabet, as a provider's key body is.
func randomKey(rng *rand.Rand, n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// TestOpenAIKeysWithoutMarker: OpenAI keys of today's shapes that lack the
// marker gitleaks' rule needs are redacted in text and in JSON, and
// hyphenated words that begin like them are not.
func TestOpenAIKeysWithoutMarker(t *testing.T) {
	r := testRedactor(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	keys := []string{
		"sk-proj-" + randomKey(rng, 156, alnum+"-_"),
		"sk-svcacct-" + randomKey(rng, 150, alnum+"-_"),
		"sk-admin-" + randomKey(rng, 120, alnum+"-_"),
		"sk-" + randomKey(rng, 48, alnum),
		"sk-" + randomKey(rng, 32, "0123456789abcdef") + "A", // a compatible service's hex key
	}
	for _, k := range keys {
		for _, text := range []string{k, "401 for key " + k + ".", "OPENAI_API_KEY=" + k, "key:" + k + "\n"} {
			got, n := r.RedactString(text)
			if strings.Contains(got, k) || n == 0 {
				t.Errorf("RedactString(%q) = %q (%d redactions), want the key gone", text, got, n)
			}
		}
		doc := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"note":"use ` + k + ` here"}}}`)
		if got, _ := r.Redact(doc); strings.Contains(string(got), k) || !strings.Contains(string(got), "[REDACTED:openai-api-key]") {
			t.Errorf("Redact kept the key or named another rule: %s", got)
		}
	}
	for _, text := range []string{
		"pip install scikit-learn; sk-learn is an alias",
		"the task-force-one-two-three-four-five-six-seven-eight-nine is done",
		"sk-proj-documentation-and-examples-for-the-new-project-layout",
		"sk-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"disk-0123456789abcdefABCDEF0123456789abcdef is full",
		"sk-0123456789012345678901234567890123456789",
	} {
		if got, n := r.RedactString(text); n != 0 {
			t.Errorf("RedactString(%q) = %q, want it unchanged", text, got)
		}
	}
}
