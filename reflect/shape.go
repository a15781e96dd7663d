package reflect

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
)

// shapes name the value formats a lesson may prescribe, most specific
// first. A value's shape is what a lesson says instead of the value.
var shapes = sync.OnceValue(func() []shape {
	return []shape{
		{regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$`), "an RFC 3339 date-time (YYYY-MM-DDTHH:MM:SSZ)"},
		{regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?$`), "YYYY-MM-DD HH:MM"},
		{regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`), "YYYY-MM-DD"},
		{regexp.MustCompile(`^\d{4}/\d{2}/\d{2}$`), "YYYY/MM/DD"},
		{regexp.MustCompile(`^\d{1,2}[/.-]\d{1,2}[/.-]\d{4}$`), dayMonthYear},
		{regexp.MustCompile(`^\d{8}$`), "YYYYMMDD"},
		{regexp.MustCompile(`^\d{1,2}:\d{2}(:\d{2})?$`), "HH:MM"},
		{regexp.MustCompile(`^\d{1,2}(:\d{2})?\s?[aApP][mM]$`), "a 12-hour time (H:MM am/pm)"},
		{regexp.MustCompile(`^\d+$`), "digits only"},
		{regexp.MustCompile(`^-?\d+\.\d+$`), "a decimal number"},
		{regexp.MustCompile(`^[A-Z]{3}$`), "a three-letter upper-case code"},
		{regexp.MustCompile(`^[a-z]{3}$`), "a three-letter lower-case code"},
		{regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[a-z]{2,}$`), "an e-mail address"},
		{regexp.MustCompile(`^https?://`), "a full URL"},
		{regexp.MustCompile(`^/`), "an absolute path"},
		{regexp.MustCompile(`^\.{0,2}[\w-]+/`), "a relative path"},
	}
})

// A shape is a value format: a pattern and its name.
type shape struct {
	re   *regexp.Regexp
	name string
}

// dayMonthYear stands for the dates with the year last, whose order of day
// and month dayOrMonthFirst tells from the value.
const dayMonthYear = "NN?NN?YYYY"

// dayOrMonthFirst names the shape of a date with the year last: DD/MM/YYYY
// when the first number cannot be a month, MM/DD/YYYY when the second
// cannot, else NN/NN/YYYY (the value does not tell), with its separator.
func dayOrMonthFirst(s string) string {
	sep := s[strings.IndexAny(s, "/.-")]
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == rune(sep) })
	a, b := atoi(parts[0]), atoi(parts[1])
	shape := "NN/NN/YYYY"
	switch {
	case a > 12:
		shape = "DD/MM/YYYY"
	case b > 12:
		shape = "MM/DD/YYYY"
	}
	return strings.ReplaceAll(shape, "/", string(sep))
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
	}
	return n
}

// shapeOf names the format of a JSON value: one of shapes for strings,
// "a number" or "a string of digits" to tell a JSON number from a string,
// and "" when it has no name.
func shapeOf(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return ""
	}
	str, ok := x.(string)
	if !ok {
		if k := kindOf(v); k != "a number" {
			return k
		}
		return "a JSON number"
	}
	str = strings.TrimSpace(str)
	for _, sh := range shapes() {
		if !sh.re.MatchString(str) {
			continue
		}
		switch sh.name {
		case dayMonthYear:
			return dayOrMonthFirst(str)
		case "digits only":
			return "a string of digits"
		}
		return sh.name
	}
	return ""
}

// kindOf names a JSON value's type for a lesson: "a string", "a number"…
func kindOf(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "a value"
	}
	switch x.(type) {
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	}
	return "a value"
}

// formatCue matches error texts that are about a value's format.
var formatCue = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(format|formatted|expected|expecting|must be|should be|invalid|malformed|pattern|parse|unparseable|iso|yyyy|not a valid)\b`)
})

// floodCue matches error texts that say the calls come too fast: the
// error itself tells the caller to stop sending them.
var floodCue = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(rate.?limit|too many requests|too (quickly|fast|frequent)|slow down|throttl|quota exceeded)`)
})

// transientCue matches error texts of failures that pass by themselves.
var transientCue = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(timed? ?out|timeout|temporar|try again|unavailable|rate.?limit|too many requests|\b429\b|\b503\b|\b502\b|\b504\b|overloaded|busy|ECONNRESET|ETIMEDOUT)`)
})
