package reflect

import (
	"regexp"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
)

// quotedName matches a quoted identifier: a property, field, column or
// table name as schema validators and databases quote them ('file_path',
// "customer_id", `orders.total`), without a digit (ids have them).
var quotedName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^(['\"`])[A-Za-z_][A-Za-z_.]*[A-Za-z_](['\"`])$") })

// keepNames puts back, in tpl (the template of the error text), the quoted
// names the template masked where they are no value of the task (vals):
// "'file_path' is a required property" and "'ranges' is a required
// property" need different fixes, so their templates stay apart. A quoted
// word that the task sent or read is an instance value wherever it shows
// up, and stays masked. Tokens are aligned by position; a template of
// another length than the text is returned as it is.
func keepNames(tpl, text string, vals *taskValues) string {
	tt, xt := errtemplate.Tokens(tpl), errtemplate.Tokens(text)
	if len(tt) > len(xt) || tpl == "" {
		return tpl
	}
	changed := false
	for i, t := range tt {
		lead, core, trail := cutPunct(t)
		if core != errtemplate.Wildcard {
			continue
		}
		xl, xcore, xtr := cutPunct(xt[i])
		if xl != lead || xtr != trail || !quotedName().MatchString(xcore) {
			continue
		}
		inner := xcore[1 : len(xcore)-1]
		if vals.values[inner] || len(inner) < 3 {
			continue
		}
		tt[i], changed = lead+xcore+trail, true
	}
	if !changed {
		return tpl
	}
	return strings.Join(tt, " ")
}

// cutPunct splits a token into the brackets before it, its core and the
// punctuation after it, as the template masker does.
func cutPunct(tok string) (lead, core, trail string) {
	core = strings.TrimLeft(tok, "([{")
	lead = tok[:len(tok)-len(core)]
	c := strings.TrimRight(core, ")]},;:.!?")
	return lead, c, core[len(c):]
}

// stepValues are the values of s's own call, for a step read without its
// task.
func stepValues(s *hindsight.Step) *taskValues {
	return newTaskValues(&hindsight.Task{Steps: []hindsight.Step{*s}})
}
