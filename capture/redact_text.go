package capture

import (
	"regexp"
	"sort"
	"strings"
)

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
