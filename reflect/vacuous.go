package reflect

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
)

// DropVacuous is the drop reason of a lesson whose advice says nothing
// its own error text does not: "the x value was rejected; pass a
// different, valid x" under an error that rejected x.
const DropVacuous = "vacuous"

// vacuousCandidate is vacuous for candidate c learned from the cited
// steps: its error templates are the ones its lesson quotes and those of
// the cited failures of its tool, and the arguments of those failures
// whose values their error texts quote count as named by the error.
func vacuousCandidate(c *hindsight.Experience, cited []*hindsight.Step) string {
	templates := backquoted().FindAllString(c.Lesson, -1)
	var implied []string
	failed := false
	for _, s := range cited {
		if !s.Failed() || s.Tool != c.Tool {
			continue
		}
		failed = true
		text := errorText(s)
		templates = append(templates, templateOf(s))
		var args map[string]any
		if json.Unmarshal(s.Arguments, &args) == nil {
			for k, v := range args {
				if x := scalarString(v); len(x) >= 2 && strings.Contains(text, x) {
					implied = append(implied, k)
				}
			}
		}
	}
	if !failed {
		return ""
	}
	return vacuous(c.Lesson, c.Tool, strings.Join(templates, " "), implied)
}

// vacuous returns why the advice of lesson carries no information beyond
// its error template, its tool and the arguments implied (whose values the
// error quoted, masked in the template), or "" when it names something more: another tool, an
// argument or shape the error does not name, an order, a value to take
// from somewhere, or a behaviour (retry once, stop retrying). The rule
// and model lessons alike are read the same way: the part quoted between
// backquotes (the error) is set aside, then every word of the advice that
// is a restating word (pass, different, valid, rejected…), a stop word,
// or a word of the error or the tool is removed; advice with no word left
// is vacuous.
func vacuous(lesson, tool, template string, implied []string) string {
	advice := backquoted().ReplaceAllString(lesson, " ")
	known := map[string]bool{}
	for _, s := range append([]string{template, tool}, implied...) {
		for _, w := range adviceWords(s) {
			known[w] = true
		}
	}
	for _, w := range adviceWords(advice) {
		if !known[w] && !restating[w] && !known[strings.TrimSuffix(w, "s")] {
			return ""
		}
	}
	return "its advice says nothing its error template does not"
}

// adviceWords are the words of s, lower case, and its shapes: runs of
// words joined by . / : - (a date format, a path of fields), trimmed of
// the punctuation around them.
func adviceWords(s string) []string {
	s = strings.ToLower(s)
	out := adviceWord().FindAllString(s, -1)
	for _, sh := range adviceShape().FindAllString(s, -1) {
		if sh = strings.Trim(sh, ".:/-"); strings.ContainsAny(sh, "./:-") {
			out = append(out, sh)
		}
	}
	return out
}

var (
	adviceWord  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[\pL\pN_]+`) })
	adviceShape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[\pL\pN_./:-]+`) })
	// restating are the words advice uses to say "change what the error
	// rejected" without saying how, and the stop words around them.
	restating = setOf(`a an the this that it its is was were be been value values argument arguments
		parameter parameters input inputs field fields rejected invalid valid different another correct right
		proper appropriate other new pass passed give use used set provide when fails failed fail with error
		errors or and to of for in on as one ones not if then instead try again retry check make sure`)
)

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// Vacuous reports whether a stored experience's advice says nothing its
// error template does not (the check validation applies, without the
// source step's text and arguments).
func Vacuous(e *hindsight.Experience) bool {
	return e.ErrorTemplate != "" && vacuous(e.Lesson, e.Tool, e.ErrorTemplate, nil) != ""
}
