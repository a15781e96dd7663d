package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight/wire"
	"github.com/zricethezav/gitleaks/v8/config"
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
}

// gitleaksBit marks the gitleaks keywords in a keywordIndex.
const gitleaksBit = 1 << 63

// textRule replaces the first capture group of re (or the whole match)
// with the placeholder for id.
type textRule struct {
	id         string
	re         *regexp.Regexp
	keyGroup   int // group naming the key, for "key:NAME" ids; 0: none
	valueGroup int // group holding the secret; 0: see group
	// check, when set, vetoes a match given its key (keyGroup's text) and
	// secret.
	check func(key, secret string) bool
	// parts, when set, splits a match into the secrets it holds (cookie
	// values), each also removed from the rest of the message.
	parts func(secret string) []string
	// keywords, when set, must occur in the lower-cased text for the rule
	// to run: a cheap prefilter, as gitleaks does.
	keywords []string
}

// gitleaksKeywords are the keywords of the gitleaks default rules, read
// from the rule file compiled into gitleaks without compiling the rules
// (checkKeywords holds them to the compiled rules).
var gitleaksKeywords = func() []string {
	var out []string
	for _, m := range keywordsLine.FindAllStringSubmatch(config.DefaultConfig, -1) {
		for _, q := range tomlString.FindAllStringSubmatch(m[1], -1) {
			out = append(out, q[1]+q[2])
		}
	}
	return out
}()

var (
	keywordsLine = regexp.MustCompile(`(?m)^\s*keywords\s*=\s*\[([^\]]*)\]`)
	tomlString   = regexp.MustCompile(`"([^"\\]*)"|'([^']*)'`)
)

// keywordsIndex indexes the gitleaks keywords (gitleaksBit) and those of
// the built-in text rules (bit i: builtinText[i]).
var keywordsIndex = sync.OnceValues(func() (*keywordIndex, error) {
	x := &keywordIndex{}
	for _, k := range gitleaksKeywords {
		if len(k) < minKeyword {
			return nil, fmt.Errorf("load gitleaks rules: keyword %q shorter than %d bytes", k, minKeyword)
		}
		if !keywordInLeaf(k) {
			return nil, fmt.Errorf("load gitleaks rules: keyword %q could span two strings of a document; cleanJSON cannot look for it", k)
		}
		x.add(k, gitleaksBit)
	}
	if len(gitleaksKeywords) < 100 {
		return nil, fmt.Errorf("load gitleaks rules: only %d keywords read from its rule file", len(gitleaksKeywords))
	}
	for i, rule := range builtinText {
		for _, k := range rule.keywords {
			if !keywordInLeaf(k) {
				return nil, fmt.Errorf("redact rule %s: keyword %q could span two strings of a document", rule.id, k)
			}
			x.add(k, 1<<i)
		}
	}
	return x, nil
})

// keywordInLeaf reports whether keyword k can only occur in the "key:
// value" lines that redactJSON scans within one key or one value: it holds
// no line break and no ": ", does not begin with a space and does not end
// with a colon.
func keywordInLeaf(k string) bool {
	return !strings.Contains(k, "\n") && !strings.Contains(k, ": ") && !strings.HasPrefix(k, " ") && !strings.HasSuffix(k, ":")
}

// NewRedactor returns a Redactor with the built-in rules and those of cfg.
func NewRedactor(cfg RedactorConfig) (*Redactor, error) {
	kw, err := keywordsIndex()
	if err != nil {
		return nil, err
	}
	r := &Redactor{keywords: kw, keys: map[string]string{}}
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
	seen := found{}
	if wire.Valid(data) {
		if len(r.patterns) == 0 && r.cleanJSON(data, 0, false) {
			return data, 0
		}
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

// scan runs the gitleaks rules over text and returns what they found,
// longest first. kw are the keywords found in text (or a superset): without
// gitleaksBit, gitleaks is not run at all.
func (r *Redactor) scan(text string, kw uint64) []finding {
	if len(text) < minSecretLen || kw&gitleaksBit == 0 {
		return nil
	}
	var out []finding
	for _, f := range r.detector().detect(text) {
		if len(f.Secret) < 4 || strings.HasPrefix(f.Secret, "[REDACTED:") {
			continue
		}
		out = append(out, finding{id: f.RuleID, secret: f.Secret})
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].secret) > len(out[j].secret) })
	return out
}

type finding struct{ id, secret string }

// minSecretLen is the shortest text worth scanning: no rule matches less.
const minSecretLen = 8

// redactText replaces the gitleaks findings in s, then applies the
// built-in and user text rules, noting what it removed in seen. present
// holds the keywords found in s (bit i: builtinText[i]); a superset will do,
// as a rule's expression cannot match without its keyword.
func (r *Redactor) redactText(s string, secrets []finding, seen found, present uint64) (string, int) {
	n := 0
	for _, f := range secrets {
		if c := strings.Count(s, f.secret); c > 0 {
			s = strings.ReplaceAll(s, f.secret, Placeholder(f.id))
			n += c
			seen.add(f.secret, f.id)
		}
	}
	if len(s) < minSecretLen {
		return s, n
	}
	if n > 0 {
		present = r.keywords.find(s, 0) // the placeholders changed the text
	}
	for i, rule := range builtinText {
		if len(rule.keywords) == 0 || present&(1<<i) != 0 {
			s = rule.apply(s, &n, seen)
		}
	}
	for _, rule := range r.patterns {
		s = rule.apply(s, &n, seen)
	}
	return s, n
}

func (t textRule) apply(s string, n *int, seen found) string {
	locs := t.re.FindAllStringSubmatchIndex(s, -1)
	if len(locs) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, loc := range locs {
		start, end := loc[0], loc[1]
		if g := t.group(); len(loc) > 2*g+1 && loc[2*g] >= 0 {
			start, end = loc[2*g], loc[2*g+1]
		}
		if start < last || start == end || strings.HasPrefix(s[start:], "[REDACTED:") {
			continue
		}
		id, key := t.id, ""
		if t.keyGroup > 0 && loc[2*t.keyGroup] >= 0 {
			ks := loc[2*t.keyGroup]
			for ks > 0 && isKeyByte(s[ks-1]) {
				ks-- // the whole key name: "DB_PASSWORD", "progressToken"
			}
			key = s[ks:loc[2*t.keyGroup+1]]
			id = "key:" + canonicalKey(normalizeKey(key))
		}
		if t.check != nil && !t.check(key, s[start:end]) {
			continue
		}
		seen.add(s[start:end], id)
		if t.parts != nil {
			for _, p := range t.parts(s[start:end]) {
				seen.add(p, id)
			}
		}
		b.WriteString(s[last:start])
		b.WriteString(Placeholder(id))
		last = end
		*n++
	}
	b.WriteString(s[last:])
	return b.String()
}

func isKeyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}

// group is the capture group holding the secret: valueGroup, else the first
// group when the expression has one, else the whole match.
func (t textRule) group() int {
	if t.valueGroup > 0 {
		return t.valueGroup
	}
	if t.re.NumSubexp() > 0 {
		return 1
	}
	return 0
}

// leaf is one JSON string (or a number under a sensitive key) to redact.
type leaf struct {
	start, end int    // byte range of the token in the document
	key        string // the member's key, "" in arrays and for keys
	value      string // decoded string
	sensitive  string // rule id when under a sensitive key
	isKey      bool
	isNumber   bool
	plumbing   bool // a progress token or cursor: scanned without its key, so "token" gives no context
}

// cleanJSON reports whether doc, a valid JSON document, holds nothing
// redactJSON could change: no sensitive key, and no keyword of gitleaks or
// of a built-in text rule in any key or string (strings holding JSON are
// looked into too, as redactJSON does). Every rule needs one of those to
// fire, so a clean document, which is most of them, costs one pass that
// allocates nothing (but the decoding of strings with "\u" escapes or
// non-ASCII text, or that may hold a document) instead of the
// leaf collection, the text built for gitleaks and its scan. User patterns
// run on every text, so a Redactor with any does not ask.
//
// redactJSON looks for keywords in its leaves joined as "key: value" lines;
// looking in each string alone finds the same ones, since no keyword holds
// a line break or ": " or begins with a space or ends with a colon
// (keywordsIndex checks).
//
// searched says doc's whole text was searched for keywords already, and
// holds none (a document held in a string): its plain strings, which are
// pieces of that text, are not searched again.
func (r *Redactor) cleanJSON(doc []byte, depth int, searched bool) bool {
	for i := 0; i < len(doc); i++ {
		if doc[i] != '"' {
			continue
		}
		end, kind := r.keywords.scanString(doc, i)
		key := isKeyAt(doc, end+1)
		if kind == escapedText && !key {
			// Searched as it stands (see escapedText), and decoded only
			// if it may hold a document.
			if r.keywords.findASCII(wire.StringView(doc[i+1:end]), 0) != 0 {
				return false
			}
			if !mayHoldJSON(doc[i+1 : end]) {
				i = end
				continue
			}
		}
		plain := kind == plainText
		var s string
		if plain {
			s = wire.StringView(doc[i+1 : end])
		} else {
			s = decodeJSONString(doc[i : end+1])
		}
		i = end
		if key {
			// The protocol's own names ("progressToken") are not looked
			// at: redactJSON neither scans them nor gives them as context.
			if r.sensitiveKey(s) != "" || !(plain && searched) && !notSensitive[normalizeKey(s)] && r.keywords.findText(s, plain) != 0 {
				return false
			}
			continue
		}
		if !(plain && searched) && r.keywords.findText(s, plain) != 0 {
			return false
		}
		if t := strings.TrimSpace(s); depth < maxJSONDepth && len(t) > 1 && (t[0] == '{' || t[0] == '[') &&
			wire.Valid(wire.BytesView(t)) && !r.cleanJSON(wire.BytesView(t), depth+1, true) {
			return false
		}
	}
	return true
}

// isKeyAt reports whether the string token of a valid JSON document that
// ends just before doc[i] is an object's key: a colon follows it.
func isKeyAt(doc []byte, i int) bool {
	for ; i < len(doc); i++ {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// redactJSON redacts a valid JSON document, keeping its layout: only the
// tokens that change are rewritten.
func (r *Redactor) redactJSON(doc []byte, depth int, seen found) ([]byte, int) {
	buf := leafPool.Get().(*[]leaf)
	leaves := r.collect((*buf)[:0], doc)
	defer func() {
		if cap(leaves) > maxPooledLeaves {
			return // a rare huge document's slice is left to the GC
		}
		clear(leaves) // drop the strings before the slice is reused
		*buf = leaves[:0]
		leafPool.Put(buf)
	}()
	if len(leaves) == 0 {
		return doc, 0
	}
	// One gitleaks pass over all values, each line "key: value", gives
	// the rules their context at the cost of a single scan.
	var frag strings.Builder
	frag.Grow(fragSize(leaves))
	for _, l := range leaves {
		if l.sensitive != "" || l.isNumber || len(l.value) < 4 {
			continue
		}
		if l.key != "" && !l.plumbing {
			frag.WriteString(l.key)
			frag.WriteString(": ")
		}
		frag.WriteString(l.value)
		frag.WriteByte('\n')
	}
	fragLen := frag.Len()
	// The built-in rules' keywords are looked for once in every text they
	// may run on (the keys below a sensitive member are redacted as text
	// too but not scanned by gitleaks).
	for _, l := range leaves {
		if l.isKey && l.sensitive != "" && len(l.value) >= minSecretLen {
			frag.WriteString(l.value)
			frag.WriteByte('\n')
		}
	}
	kw := r.keywords.find(frag.String(), 0)
	secrets := r.scan(frag.String()[:fragLen], kw)
	var out []byte // made at the first change: most documents have none
	last, total := 0, 0
	for _, l := range leaves {
		var repl string
		var n int
		switch {
		case l.sensitive != "" && !l.isKey:
			if l.value == Placeholder(l.sensitive) || (!l.isNumber && l.value == "") {
				continue
			}
			seen.add(l.value, l.sensitive)
			repl, n = Placeholder(l.sensitive), 1
		default:
			repl, n = r.redactValue(l.value, secrets, depth, seen, kw)
		}
		if n == 0 {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(doc)+64)
		}
		out = append(out, doc[last:l.start]...)
		out = wire.AppendPlainString(out, repl)
		last = l.end
		total += n
	}
	if total == 0 {
		return doc, 0
	}
	out = append(out, doc[last:]...)
	return out, total
}

// leafPool holds the leaf slices of redactJSON, one per document being
// redacted (documents nested in strings take their own).
var leafPool = sync.Pool{New: func() any { return new([]leaf) }}

// maxPooledLeaves caps the slices kept in leafPool.
const maxPooledLeaves = 4096

// fragSize is the length of the text redactJSON gives gitleaks and the
// keyword search for leaves, so that it is built in one allocation.
func fragSize(leaves []leaf) int {
	n := 0
	for _, l := range leaves {
		switch {
		case l.sensitive == "" && !l.isNumber && len(l.value) >= 4:
			if l.key != "" && !l.plumbing {
				n += len(l.key) + 2
			}
			n += len(l.value) + 1
		case l.isKey && l.sensitive != "" && len(l.value) >= minSecretLen:
			n += len(l.value) + 1
		}
	}
	return n
}

// redactValue redacts one decoded string: as JSON when it holds a JSON
// object or array, else as text. A finding that spans more than the string
// (its key was part of the match) replaces the whole string.
func (r *Redactor) redactValue(v string, secrets []finding, depth int, seen found, present uint64) (string, int) {
	if t := strings.TrimSpace(v); depth < maxJSONDepth && len(t) > 1 && (t[0] == '{' || t[0] == '[') && wire.Valid(wire.BytesView(t)) {
		out, n := r.redactJSON([]byte(v), depth+1, seen)
		return string(out), n
	}
	for _, f := range secrets {
		if len(v) >= minSecretLen && !strings.Contains(v, f.secret) && strings.Contains(f.secret, v) {
			seen.add(v, f.id)
			return Placeholder(f.id), 1
		}
	}
	return r.redactText(v, secrets, seen, present)
}

// frame is an open object or array while collecting leaves.
type frame struct {
	object    bool
	expectKey bool
	key       string
	sensitive string // inherited rule id
	schema    bool   // inside a JSON Schema
}

// schemaKeys are the MCP members whose values are JSON Schemas.
var schemaKeys = map[string]bool{"inputSchema": true, "outputSchema": true, "requestedSchema": true}

// collect walks a valid JSON document and appends its string tokens (and
// the numbers below sensitive keys) in order to leaves.
func (r *Redactor) collect(leaves []leaf, doc []byte) []leaf {
	var stack []frame
	// valueSensitive is the rule id applying to the value about to start.
	valueSensitive := func() string {
		if len(stack) == 0 {
			return ""
		}
		top := &stack[len(stack)-1]
		if top.schema {
			return "" // property names in a JSON Schema hold no secrets
		}
		if top.object {
			if id := r.sensitiveKey(top.key); id != "" {
				return id
			}
		}
		return top.sensitive
	}
	// inSchema reports whether the value about to start is (inside) a JSON
	// Schema: tools/list input and output schemas, elicitation's
	// requestedSchema. Key names are not secrets there ("password":
	// {"type": "string"}); gitleaks and the text rules still apply.
	inSchema := func() bool {
		if len(stack) == 0 {
			return false
		}
		top := stack[len(stack)-1]
		return top.schema || top.object && schemaKeys[top.key]
	}
	currentKey := func() string {
		if len(stack) == 0 || !stack[len(stack)-1].object {
			return ""
		}
		return stack[len(stack)-1].key
	}
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch c {
		case '{', '[':
			stack = append(stack, frame{object: c == '{', expectKey: c == '{', sensitive: valueSensitive(), schema: inSchema()})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expectKey = true
			}
		case '"':
			end := stringEnd(doc, i)
			raw := doc[i : end+1]
			val := decodeJSONString(raw)
			if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].expectKey {
				top := &stack[len(stack)-1]
				top.key, top.expectKey = val, false
				// A key is redacted as text (a map may be keyed by a
				// secret), but not the protocol's own names
				// ("progressToken", "nextCursor"): those would only wake
				// the rules keyed on "token" in every request.
				if len(val) >= minSecretLen && !notSensitive[normalizeKey(val)] {
					leaves = append(leaves, leaf{start: i, end: end + 1, value: val, isKey: true, sensitive: top.sensitive})
				}
			} else {
				k := currentKey()
				leaves = append(leaves, leaf{start: i, end: end + 1, key: k, value: val, sensitive: valueSensitive(),
					plumbing: k != "" && notSensitive[normalizeKey(k)]})
			}
			i = end
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			j := i
			for j < len(doc) && strings.IndexByte("+-.eE0123456789", doc[j]) >= 0 {
				j++
			}
			if id := valueSensitive(); id != "" {
				leaves = append(leaves, leaf{start: i, end: j, key: currentKey(), value: string(doc[i:j]), sensitive: id, isNumber: true})
			}
			i = j - 1
		}
	}
	return leaves
}

// stringEnd returns the index of the quote closing the string that opens
// at doc[start].
func stringEnd(doc []byte, start int) int { return stringEndFrom(doc, start+1) }

// stringEndFrom is stringEnd, scanning from doc[i], inside the string.
func stringEndFrom(doc []byte, i int) int {
	for ; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(doc) - 1
}

// decodeJSONString decodes a JSON string token (quotes included) of a
// document already checked by json.Valid. A string without escapes is
// returned as a view of raw, without copying.
func decodeJSONString(raw []byte) string {
	body := raw[1 : len(raw)-1]
	if !utf8.Valid(body) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s // invalid bytes become U+FFFD, one each
		}
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	if bytes.IndexByte(body, '\\') < 0 {
		// A view of the document, which is never modified while it is
		// redacted (a request or response as relayed, or a copy made for
		// a document nested in a string); nothing outlives it but copies.
		return wire.StringView(body)
	}
	b := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		// Copy the run up to the next escape at once.
		if n := bytes.IndexByte(body[i:], '\\'); n != 0 {
			if n < 0 {
				n = len(body) - i
			}
			b = append(b, body[i:i+n]...)
			if i += n - 1; i+1 >= len(body) {
				break
			}
			continue
		}
		if i+1 >= len(body) {
			b = append(b, '\\')
			break
		}
		i++
		switch body[i] {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'u':
			r, n := decodeEscapedRune(body[i-1:])
			b = utf8.AppendRune(b, r)
			i += n - 2
		default: // '"', '\\', '/'
			b = append(b, body[i])
		}
	}
	// b is not written again: the string may share its bytes.
	return wire.StringView(b)
}

// decodeEscapedRune decodes \uXXXX (and a following low surrogate) at the
// start of s, returning the rune and the bytes used; bad input gives
// U+FFFD, as encoding/json does.
func decodeEscapedRune(s []byte) (rune, int) {
	r1 := hex4(s)
	if r1 < 0 {
		return utf8.RuneError, 2
	}
	if utf16.IsSurrogate(r1) {
		if r2 := hex4(s[6:]); len(s) >= 12 && s[6] == '\\' && r2 >= 0 {
			if r := utf16.DecodeRune(r1, r2); r != utf8.RuneError {
				return r, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r1, 6
}

// hex4 parses the XXXX of \uXXXX at the start of s, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
