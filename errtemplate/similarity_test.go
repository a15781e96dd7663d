package errtemplate

import (
	"strings"
	"testing"
)

func TestSimilarity(t *testing.T) {
	tests := []struct {
		name, template, text string
		want                 float64
	}{
		{"instance", "user <*> not found", "user 42 not found", 1},
		{"instance with id", "user <*> not found", "user alice_1984 not found", 1},
		{"literal attached to wildcard", "total price is <*>, but paid <*>", "total price is 1203, but paid 833", 1},
		{"quoted run is one token", "invalid date format <*>, expected YYYY-MM-DD", `invalid date format "March 15", expected YYYY-MM-DD`, 1},
		{"identical literal text", "HTTP 401 Unauthorized", "HTTP 401 Unauthorized", 1},
		{"one of three literals differs", "user <*> not found", "user 42 not removed", 2.0 / 3},
		{"a name is not a wildcard there", "user <*> not found", "user Alice Smith not found", 0},
		{"fewer tokens", "user <*> not found", "user not found", 0},
		{"more tokens", "user <*> not found", "user 42 was not found", 0},
		{"hard negative: same length, other error", "reservation <*> not found", "user 42 not found", 2.0 / 3},
		{"hard negative: other error of the tool", "missing required argument: <*>", "invalid date format '03/15/2025'", 0},
		{"hard negative: 401 vs 404", "request to <*> failed with status 404", "request to https://x.test/a failed with status 401", 0},
		{"hard negative: HTTP 401 vs 404", "HTTP 401 Unauthorized", "HTTP 404 Unauthorized", 0},
		{"literal vs masked value", "missing argument currency", "missing argument 'currency'", 2.0 / 3},
		{"only wildcards vs words", "<*> <*>", "Alice Smith", 0.5},
		{"only wildcards vs values", "<*> <*>", "42 'x y'", 1},
		{"empty both", "", "", 1},
		{"empty template", "", "error", 0},
		{"template spaces are normalised", "  user   <*> not found ", "user 7 not found", 1},
		{"long text cut like the Miner", strings.Repeat("x ", DefaultMaxTokens), strings.Repeat("x ", DefaultMaxTokens+5), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Similarity(tt.template, tt.text)
			if got != tt.want {
				t.Errorf("Similarity(%q, %q) = %v, want %v", tt.template, tt.text, got, tt.want)
			}
			if same := Same(tt.template, tt.text); same != (tt.want == 1) {
				t.Errorf("Same(%q, %q) = %v, want %v", tt.template, tt.text, same, tt.want == 1)
			}
		})
	}
}

func TestScore(t *testing.T) {
	tests := []struct {
		tpl, txt      string
		equal, params int
		ok            bool
	}{
		{"user <*> not found", "user <*> not found", 4, 0, true},
		{"user <*> not found", "user Bob not found", 3, 1, true},
		{"user Alice not found", "user Bob not found", 3, 0, true},
		{"status 404", "status 401", 0, 0, false},
		{"", "", 0, 0, true},
	}
	for _, tt := range tests {
		equal, params, ok := score(Tokens(tt.tpl), Tokens(tt.txt))
		if equal != tt.equal || params != tt.params || ok != tt.ok {
			t.Errorf("score(%q, %q) = %d, %d, %v; want %d, %d, %v", tt.tpl, tt.txt, equal, params, ok, tt.equal, tt.params, tt.ok)
		}
	}
}

// TestSimilarityQuotedLiteral holds a template's quoted literal (a name
// the reflector put back) to the text's token at its place.
func TestSimilarityQuotedLiteral(t *testing.T) {
	tpl := "Input validation error: 'file_path' is a required property"
	for text, want := range map[string]float64{
		"Input validation error: 'file_path' is a required property": 1,
		"Input validation error: 'ranges' is a required property":    0,
		"Input validation error: file_path is a required property":   0,
		"Input validation error: 'file_path' is an unknown property": 6.0 / 8,
	} {
		if got := Similarity(tpl, text); got != want {
			t.Errorf("Similarity(%q, %q) = %v, want %v", tpl, text, got, want)
		}
	}
	if got := Similarity("missing argument <*>", "missing argument 'currency'"); got != 1 {
		t.Errorf("a masked quoted value no longer fits: %v", got)
	}
}
