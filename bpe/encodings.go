package bpe

import "strings"

// encoding describes one encoding: its rank file among the loader's
// assets, its pre-tokenising pattern, and size hints for its table.
type encoding struct {
	file    string
	pattern string
	tokens  int // number of mergeable tokens
	bytes   int // their bytes end to end, rounded up
}

// encodings are the encodings Load builds, with tiktoken's patterns.
var encodings = map[string]encoding{
	"cl100k_base": {
		file:    "cl100k_base.tiktoken",
		pattern: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
		tokens:  100_256,
		bytes:   650_000,
	},
	"o200k_base": {
		file: "o200k_base.tiktoken",
		pattern: strings.Join([]string{
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
			`\p{N}{1,3}`,
			` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
			`\s*[\r\n]+`,
			`\s+(?!\S)`,
			`\s+`,
		}, "|"),
		tokens: 199_998,
		bytes:  1_400_000,
	},
}

// Default is the encoding of models ForModel does not know: right for
// current OpenAI models and close enough for others.
const Default = "o200k_base"

// ForModel returns the encoding of model: the one tiktoken gives the
// models and model prefixes it knows, Default otherwise. Models tiktoken
// gives an encoding Load does not build (p50k_base, r50k_base: models
// retired before this project) get Default too.
func ForModel(model string) string {
	if name, ok := modelEncodings[model]; ok {
		return name
	}
	for _, p := range prefixEncodings {
		if strings.HasPrefix(model, p.prefix) {
			return p.encoding
		}
	}
	return Default
}

// modelEncodings and prefixEncodings copy tiktoken-go's model tables for
// the models of the encodings Load builds; TestForModelMatchesTiktoken
// compares them.
var modelEncodings = map[string]string{
	"gpt-4.5":                "o200k_base",
	"gpt-4.1":                "o200k_base",
	"gpt-4o":                 "o200k_base",
	"gpt-4":                  "cl100k_base",
	"gpt-3.5-turbo":          "cl100k_base",
	"text-embedding-ada-002": "cl100k_base",
	"text-embedding-3-large": "cl100k_base",
	"text-embedding-3-small": "cl100k_base",
}

var prefixEncodings = []struct{ prefix, encoding string }{
	{"gpt-4.5-", "o200k_base"},
	{"gpt-4.1-", "o200k_base"},
	{"gpt-4o-", "o200k_base"},
	{"gpt-4-", "cl100k_base"},
	{"gpt-3.5-turbo-", "cl100k_base"},
}
