package convert

import (
	"regexp"
	"strings"
)

// Rule names the error class of the failures whose text matches Pattern;
// $1 in Class stands for the pattern's first group.
type Rule struct {
	Class   string
	Pattern *regexp.Regexp
}

// Classifier labels failed calls: the first rule whose pattern matches the
// error text names its class; a text no rule matches is classed by its
// reference template.
type Classifier []Rule

// Classify returns the error class of c.
func (cl Classifier) Classify(c Call) string {
	for _, r := range cl {
		if m := r.Pattern.FindStringSubmatchIndex(c.Text); m != nil {
			return string(r.Pattern.ExpandString(nil, r.Class, c.Text, m))
		}
	}
	return "ref:" + ReferenceTemplate(c.Text)
}

var (
	refQuoted = regexp.MustCompile(`'[^']*'|"[^"]*"|“[^”]*”|` + "`[^`]*`")
	refURL    = regexp.MustCompile(`\b[a-z][a-z0-9+.-]*://\S+`)
	refPath   = regexp.MustCompile(`(?:~|\.{0,2})/[^\s,;:)]*`)
	refNumber = regexp.MustCompile(`\b[0-9a-f]*[0-9][0-9a-f_.:-]*\b`)
	refWord   = regexp.MustCompile(`[a-z]+`)
)

// ReferenceTemplate is a fixed reduction of an error text that the
// reflector does not use: lower case, quoted strings, URLs, paths and
// anything with a digit removed, then the first eight words of letters
// only, joined by "_".
func ReferenceTemplate(text string) string {
	t := strings.ToLower(text)
	for _, re := range []*regexp.Regexp{refQuoted, refURL, refPath, refNumber} {
		t = re.ReplaceAllString(t, " ")
	}
	w := refWord.FindAllString(t, 8)
	if len(w) == 0 {
		return "empty"
	}
	return strings.Join(w, "_")
}

// rules builds a Classifier from class, pattern pairs.
func rules(pairs ...string) Classifier {
	var cl Classifier
	for i := 0; i+1 < len(pairs); i += 2 {
		cl = append(cl, Rule{pairs[i], regexp.MustCompile(pairs[i+1])})
	}
	return cl
}
