package demo

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Advice is what the scripted agent understood from a piece of text — an
// error message, an injected lesson, a query_hindsight answer — about calls
// of one tool. The agent acts on advice the same way whatever its source:
// in the first run it comes from error messages, after the failure; in the
// second from Hindsight, before it.
type Advice struct {
	Tool    string            // the tool it is about; "" when unknown
	Before  []string          // tools to call first (once per session)
	Formats map[string]string // argument → Go time layout its dates must use
	Values  map[string]any    // argument → value to pass
	Wait    time.Duration     // how long to wait before calling again
	Source  string            // the sentence it came from, for the transcript
}

func (a *Advice) empty() bool {
	return len(a.Before) == 0 && len(a.Formats) == 0 && len(a.Values) == 0 && a.Wait == 0
}

// merge adds b to a.
func (a *Advice) merge(b Advice) {
	for _, t := range b.Before {
		if !contains(a.Before, t) {
			a.Before = append(a.Before, t)
		}
	}
	for k, v := range b.Formats {
		if a.Formats == nil {
			a.Formats = map[string]string{}
		}
		a.Formats[k] = v
	}
	for k, v := range b.Values {
		if a.Values == nil {
			a.Values = map[string]any{}
		}
		a.Values[k] = v
	}
	a.Wait = max(a.Wait, b.Wait)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var (
	// "call login before fetch_report", "call login then open_session before X"
	callBeforeRE = regexp.MustCompile(`(?i)\bcall ([a-z_][\w]*(?:(?: then |, | and )[a-z_][\w]*)*) (?:first|before (?:calling )?([a-z_][\w]*))`)
	// "invalid due_date "04/15/2026": expected YYYY-MM-DD"
	expectedFormatRE = regexp.MustCompile(`(?i)\binvalid ([a-z_][\w]*)\b[^.;]*?\bexpected ([YMDN]{2,4}[-/.][YMDN]{2}[-/.][YMDN]{2,4})`)
	// "pass due_date in the form NNNN-NN-NN (like "2026-04-15")"
	inTheFormRE = regexp.MustCompile(`(?i)\b([a-z_][\w]*) (?:in the form|in the format|formatted as|as) ([YMDN]{2,4}[-/.][YMDN]{2}[-/.][YMDN]{2,4})`)
	// "pass pause_ms=300", "(e.g. pause_ms=300)", "set pause_ms to 300"
	assignRE = regexp.MustCompile(`(?i)\b(?:pass|e\.g\.|with|set) ([a-z_][\w]*) ?(?:=|to) ?("[^"]*"|-?\d+(?:\.\d+)?|true|false)`)
	// "Retry after 300 ms", "retry_after_ms": 300, "wait 2 s"
	retryAfterRE = regexp.MustCompile(`(?i)\b(?:retry after|wait) (\d+) ?(ms|milliseconds|s|seconds)\b`)
	// "when calling create_invoice, …", "about fetch_report"
	whenCallingRE = regexp.MustCompile(`(?i)\bwhen calling ([a-z_][\w]*)`)
)

// Parse reads advice about tool from text. tool is the tool the text is
// known to be about (the failing call, the lesson's tool); "" lets the text
// say ("when calling X", "before X").
func Parse(tool, text string) Advice {
	text = strings.Join(strings.Fields(text), " ")
	a := Advice{Tool: tool, Source: text}
	if a.Tool == "" {
		if m := whenCallingRE.FindStringSubmatch(text); m != nil {
			a.Tool = m[1]
		}
	}
	for _, m := range callBeforeRE.FindAllStringSubmatch(text, -1) {
		if m[2] != "" {
			if a.Tool == "" {
				a.Tool = m[2]
			} else if m[2] != a.Tool {
				continue // about another tool
			}
		}
		for _, t := range regexp.MustCompile(` then |, | and `).Split(m[1], -1) {
			if t != a.Tool && !contains(a.Before, t) {
				a.Before = append(a.Before, t)
			}
		}
	}
	for _, re := range []*regexp.Regexp{expectedFormatRE, inTheFormRE} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			if layout := dateLayout(m[2]); layout != "" {
				if a.Formats == nil {
					a.Formats = map[string]string{}
				}
				a.Formats[m[1]] = layout
			}
		}
	}
	for _, m := range assignRE.FindAllStringSubmatch(text, -1) {
		var v any
		if json.Unmarshal([]byte(m[2]), &v) != nil {
			continue
		}
		if a.Values == nil {
			a.Values = map[string]any{}
		}
		a.Values[m[1]] = v
	}
	if m := retryAfterRE.FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		unit := time.Millisecond
		if strings.HasPrefix(strings.ToLower(m[2]), "s") {
			unit = time.Second
		}
		a.Wait = time.Duration(n) * unit
	}
	return a
}

// dateLayout turns a date shape — "YYYY-MM-DD", or "NNNN-NN-NN" as
// reflection writes it — into a Go time layout, or "" if it is not a date.
func dateLayout(shape string) string {
	sep := ""
	for _, r := range shape {
		if r == '-' || r == '/' || r == '.' {
			sep = string(r)
			break
		}
	}
	parts := strings.Split(strings.ToUpper(shape), sep)
	if len(parts) != 3 {
		return ""
	}
	var out []string
	for i, p := range parts {
		switch {
		case p == "YYYY" || (p == "NNNN" && i != 1):
			out = append(out, "2006")
		case p == "MM" || (p == "NN" && i == 1):
			out = append(out, "01")
		case p == "DD" || (p == "NN" && i != 1):
			out = append(out, "02")
		default:
			return ""
		}
	}
	if !contains(out, "2006") || !contains(out, "01") || !contains(out, "02") {
		return ""
	}
	return strings.Join(out, sep)
}

// Lesson is one lesson Hindsight showed, with the tool it is about.
type Lesson struct {
	Tool string
	Text string
}

var (
	instrLineRE = regexp.MustCompile(`^- ([a-z_][\w]*): (.+)$`)
	blockHeadRE = regexp.MustCompile(`^\d+\. ([a-z_][\w]*|\(any tool\))`)
)

// Lessons extracts the lessons from text Hindsight injected: the lines of
// an instructions block ("- tool: lesson"), the experiences of a
// query_hindsight answer ("1. tool (…)" then "Lesson: …") and the lines of
// an error-result block ("- lesson", about tool).
func Lessons(tool, text string) []Lesson {
	var out []Lesson
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case blockHeadRE.MatchString(line):
			cur = blockHeadRE.FindStringSubmatch(line)[1]
			if cur == "(any tool)" {
				cur = ""
			}
		case strings.HasPrefix(line, "Lesson: "):
			out = append(out, Lesson{cur, strings.TrimPrefix(line, "Lesson: ")})
		case instrLineRE.MatchString(line):
			m := instrLineRE.FindStringSubmatch(line)
			out = append(out, Lesson{m[1], m[2]})
		case strings.HasPrefix(line, "- "):
			out = append(out, Lesson{tool, strings.TrimPrefix(line, "- ")})
		}
	}
	return out
}
