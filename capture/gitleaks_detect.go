package capture

import (
	"math"
	"strings"

	"github.com/zricethezav/gitleaks/v8/config"
)

// gitleaksFinding is what a gitleaks rule finds in a text: the fields of
// gitleaks' report.Finding that a text (no file, no commit) gives.
type gitleaksFinding struct {
	RuleID, Secret string
	// Match is what the rule's expression matched; Line the text around
	// it as gitleaks cuts it (its allowlists may test either).
	Match, Line string
	// StartLine and StartColumn place Match as gitleaks does (composite
	// rules test their parts' distance on them).
	StartLine, StartColumn int
}

// compiledRule is a rule with its expressions compiled and the rules it
// requires (a composite rule's parts), also compiled.
type compiledRule struct {
	rule     config.Rule
	required map[string]config.Rule
}

// gitleaksAllowSignature on a secret's line keeps gitleaks from reporting it.
const gitleaksAllowSignature = "gitleaks:allow"

// find runs rule c over text as gitleaks' Detector.DetectString runs a
// rule over a text with no file path or commit and no decoding pass (as
// the detector the redactor used to build per rule did; the equivalence
// with gitleaks' own Detector is tested on the secrets corpus): every
// match, its secret group, its entropy, the global and the rule's
// allowlists, and a composite rule's parts near it.
func (c *compiledRule) find(text string, allow []*config.Allowlist) []gitleaksFinding {
	if c.rule.SkipReport {
		return nil
	}
	newlines := newlineIndices(text)
	found := findRule(text, newlines, &c.rule, allow)
	if len(found) == 0 || len(c.rule.RequiredRules) == 0 {
		return found
	}
	parts := make(map[string][]gitleaksFinding, len(c.rule.RequiredRules))
	for _, req := range c.rule.RequiredRules {
		if r, ok := c.required[req.RuleID]; ok {
			parts[req.RuleID] = findRule(text, newlines, &r, allow)
		}
	}
	out := found[:0]
	for _, f := range found {
		if hasRequired(f, c.rule.RequiredRules, parts) {
			out = append(out, f)
		}
	}
	return out
}

// hasRequired reports whether every rule that a composite rule requires
// found something near f (one missing from the configuration never does).
func hasRequired(f gitleaksFinding, reqs []*config.Required, parts map[string][]gitleaksFinding) bool {
	for _, req := range reqs {
		near := false
		for _, p := range parts[req.RuleID] {
			if withinProximity(f, p, req) {
				near = true
				break
			}
		}
		if !near {
			return false
		}
	}
	return true
}

func withinProximity(primary, part gitleaksFinding, req *config.Required) bool {
	if req.WithinLines != nil && abs(primary.StartLine-part.StartLine) > *req.WithinLines {
		return false
	}
	return req.WithinColumns == nil || abs(primary.StartColumn-part.StartColumn) <= *req.WithinColumns
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// findRule is gitleaks' detectRule for a text, without a composite
// rule's parts.
func findRule(text string, newlines []int, r *config.Rule, allow []*config.Allowlist) []gitleaksFinding {
	if r.Path != nil && !r.Path.MatchString("") {
		return nil // the rule wants a file path, and a text has none
	}
	if r.Regex == nil {
		return nil
	}
	var out []gitleaksFinding
	for _, m := range r.Regex.FindAllStringIndex(text, -1) {
		match := strings.Trim(text[m[0]:m[1]], "\n")
		end := m[0] + len(match)
		line, col, from, to := location(newlines, text, m[0], end)
		to = max(to, end)
		f := gitleaksFinding{RuleID: r.RuleID, Match: match, Secret: match, Line: text[from:to],
			StartLine: line, StartColumn: col}
		if strings.Contains(f.Line, gitleaksAllowSignature) {
			continue
		}
		if groups := r.Regex.FindStringSubmatch(match); len(groups) >= 2 {
			if r.SecretGroup > 0 {
				if len(groups) <= r.SecretGroup {
					continue
				}
				f.Secret = groups[r.SecretGroup]
			} else {
				for _, s := range groups[1:] {
					if s != "" {
						f.Secret = s
						break
					}
				}
			}
		}
		if r.Entropy != 0 && shannonEntropy(f.Secret) <= r.Entropy {
			continue
		}
		if allowed(f, allow) || allowed(f, r.Allowlists) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// allowed reports whether one of lists lets f go, as gitleaks'
// checkFindingAllowed does for a text: its commit and path checks fail.
func allowed(f gitleaksFinding, lists []*config.Allowlist) bool {
	for _, a := range lists {
		target := f.Secret
		switch a.RegexTarget {
		case "match":
			target = f.Match
		case "line":
			target = f.Line
		}
		byRegex := a.RegexAllowed(target)
		byWord, _ := a.ContainsStopWord(f.Secret)
		if a.MatchCondition != config.AllowlistMatchAnd {
			if byRegex || byWord {
				return true
			}
			continue
		}
		if len(a.Commits) == 0 && len(a.Paths) == 0 &&
			(len(a.Regexes) == 0 || byRegex) && (len(a.StopWords) == 0 || byWord) {
			return true
		}
	}
	return false
}

// newlineIndices are the offsets of the newlines in text.
func newlineIndices(text string) []int {
	var out []int
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], '\n')
		if j < 0 {
			break
		}
		out = append(out, i+j)
		i += j + 1
	}
	return out
}

// location returns the line and column of the match text[start:end] and
// the bounds of its line, as gitleaks' detect package computes them
// (lines count from 0 but past the last newline; a line's start is its
// newline; a match past the last newline has its line start at 0).
func location(newlines []int, text string, start, end int) (line, col, from, to int) {
	if len(newlines) == 0 {
		newlines = []int{len(text)}
	}
	prev, set := 0, false
	for n, nl := range newlines {
		if prev <= start && start < nl {
			set = true
			line, col, from, to = n, start-prev+1, prev, nl
		}
		if prev < end && end <= nl {
			to = nl
		}
		prev = nl
	}
	if set {
		return line, col, from, to
	}
	to = end
	for to < len(text) && text[to] != '\n' && text[to] != '\r' {
		to++
	}
	return len(newlines), start - prev + 1, 0, to
}

// shannonEntropy is the bits per character of data, counted as gitleaks
// counts it (characters over bytes).
func shannonEntropy(data string) float64 {
	if data == "" {
		return 0
	}
	counts := make(map[rune]int)
	for _, c := range data {
		counts[c]++
	}
	var e float64
	inv := 1 / float64(len(data))
	for _, n := range counts {
		p := float64(n) * inv
		e -= p * math.Log2(p)
	}
	return e
}
