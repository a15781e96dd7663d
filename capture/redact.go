package capture

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight/wire"
)

// Placeholder returns the text that replaces a secret found by rule id.
func Placeholder(id string) string { return "[REDACTED:" + id + "]" }

// Pattern is a user rule: text matching Regex is secret. When Regex has a
// capture group only the first group is replaced, so a rule can keep its
// context ("ticket=(\w+)").
type Pattern struct {
	Name  string // rule id shown in the placeholder
	Regex string
}

// RedactorConfig adds user rules to the built-in ones. The zero value gives
// the built-in rules only.
type RedactorConfig struct {
	// Keys are JSON key names whose values are secret, matched like the
	// built-in names: case-insensitively, ignoring '-', '_', '.' and spaces.
	Keys []string
	// Patterns are regular expressions (RE2 syntax) for secrets in text.
	Patterns []Pattern
}

// A Redactor removes secrets from JSON-RPC messages and text. It is safe
// for concurrent use; build one per process and share it.
//
// Secrets are found by, in this order:
//
//   - key names: the value of a JSON member whose key is sensitive
//     (password, token, authorization, api_key, secret, cookie…, at any
//     depth; every string and number below it) becomes [REDACTED:key:NAME];
//   - the gitleaks default rule set (v8), run once per message over its
//     string values, each preceded by its key so that rules which need
//     context ("heroku … key = …") still fire; a finding becomes
//     [REDACTED:<gitleaks rule id>];
//   - built-in text rules: PEM private keys, JWTs, bearer and basic
//     credentials, passwords in URLs and connection strings, key=value
//     pairs with sensitive keys, Cookie headers;
//   - the user's patterns.
//
// JSON stays JSON: only the contents of string values change (a sensitive
// number becomes a string placeholder), and strings that themselves hold a
// JSON document are redacted as JSON. Input that is not JSON is redacted as
// text.
type Redactor struct {
	keys     map[string]string // extra normalised key → rule id
	patterns []textRule
	// keywords finds the gitleaks rules' keywords (gitleaksBit) and those
	// of the built-in text rules (bit i: builtinText[i]). Text without a
	// gitleaks keyword cannot give a finding (every default rule but one
	// needs a keyword; that one matches file paths only), so gitleaks is
	// not run on it.
	keywords *keywordIndex
	// commonKeys are the common keys scanJSON passes without a look.
	commonKeys *cleanKeyTable
	names      *names // RedactName's cache
}

// NewRedactor returns a Redactor with the built-in rules and those of cfg.
func NewRedactor(cfg RedactorConfig) (*Redactor, error) {
	kw, err := keywordsIndex()
	if err != nil {
		return nil, err
	}
	r := &Redactor{keywords: kw, keys: map[string]string{}, names: &names{}}
	for _, k := range cfg.Keys {
		n := normalizeKey(k)
		if n == "" {
			return nil, fmt.Errorf("redact key %q: empty after normalisation", k)
		}
		r.keys[n] = "key:" + n
	}
	for _, p := range cfg.Patterns {
		if p.Name == "" {
			return nil, fmt.Errorf("redact pattern %q: missing name", p.Regex)
		}
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, fmt.Errorf("compile redact pattern %s: %w", p.Name, err)
		}
		r.patterns = append(r.patterns, textRule{id: p.Name, re: re})
	}
	r.commonKeys = r.cleanKeys()
	return r, nil
}

// maxJSONDepth bounds the recursion into strings holding JSON documents.
const maxJSONDepth = 4

// Redact returns data with every secret replaced and the number of
// replacements. Valid JSON is redacted as JSON and stays valid; anything
// else is redacted as text.
//
// A secret found anywhere in data is also removed wherever else it occurs
// in data, so a password recognised inside a URL does not survive as a bare
// value under an innocent key.
func (r *Redactor) Redact(data []byte) ([]byte, int) {
	valid := false
	if len(r.patterns) == 0 {
		// One pass validates data and looks for anything to redact.
		switch r.scanJSON(data, 0, false) {
		case docClean:
			return data, 0
		case docDirty:
			valid = wire.Valid(data)
		}
	} else {
		valid = wire.Valid(data)
	}
	seen := found{}
	if valid {
		out, n := r.redactJSON(data, 0, seen)
		return propagateJSON(out, n, seen)
	}
	s, n := r.redactString(string(data), seen)
	return []byte(s), n
}

// RedactString redacts free text (an error message, a log line).
func (r *Redactor) RedactString(s string) (string, int) {
	return r.redactString(s, found{})
}

func (r *Redactor) redactString(s string, seen found) (string, int) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) < minSecretLen {
		return s, 0 // no rule matches less
	}
	kw := r.keywords.find(s, 0)
	s, n := r.redactText(s, r.scan(s, kw), seen, kw)
	s, m := seen.replace(s)
	return s, n + m
}

// found maps each secret redacted so far in one message to its rule id.
type found map[string]string

// minPropagate is the shortest secret removed from the rest of a message:
// shorter values ("x1") would hit innocent text.
const minPropagate = 6

func (f found) add(secret, id string) {
	if len(secret) >= minPropagate && !strings.HasPrefix(secret, "[REDACTED:") {
		f[secret] = id
	}
}

// replace removes every known secret from s, longest first.
func (f found) replace(s string) (string, int) {
	if len(f) == 0 {
		return s, 0
	}
	n := 0
	for _, sec := range f.sorted() {
		if c := strings.Count(s, sec); c > 0 {
			s = strings.ReplaceAll(s, sec, Placeholder(f[sec]))
			n += c
		}
	}
	return s, n
}

func (f found) sorted() []string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) > len(keys[j])
		}
		return keys[i] < keys[j]
	})
	return keys
}

// propagateJSON removes the secrets of seen from the rest of a redacted
// document: raw, and as they appear escaped once or twice (JSON inside
// JSON strings). It keeps out when a replacement would break the JSON.
func propagateJSON(out []byte, n int, seen found) ([]byte, int) {
	if len(seen) == 0 {
		return out, n
	}
	s := string(out)
	for _, sec := range seen.sorted() {
		ph := Placeholder(seen[sec])
		forms := []string{sec}
		if e := escapeJSON(sec); e != sec {
			forms = append(forms, e, escapeJSON(e))
		}
		for _, form := range forms {
			c := strings.Count(s, form)
			if c == 0 {
				continue
			}
			// A replacement that would break the JSON (a "secret" that
			// spans a quote or an escape) is skipped, not the others.
			if next := strings.ReplaceAll(s, form, ph); wire.Valid([]byte(next)) {
				s, n = next, n+c
			}
		}
	}
	return []byte(s), n
}

func escapeJSON(s string) string {
	b := wire.AppendPlainString(nil, s)
	return string(b[1 : len(b)-1])
}
