package reflect

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
)

// partialLessons learns from failures that the next call of their tool
// got past even though the task had not recovered yet: the error quoted
// the name of an argument ("'file_path' is a required property",
// "unknown field 'query'"), and the next call added (or dropped) that
// very argument and did not fail with the same error. The constraint the
// error stated, as the next call met it, is the lesson; the error's own
// name grounds it, so it starts at the injection gate. Failures that
// recovered (recovered, by step index) are left alone, and those this
// explains are added to recovered.
func partialLessons(task *hindsight.Task, calls []*hindsight.Step, vals *taskValues, recovered map[int]bool) []hindsight.Experience {
	var out []hindsight.Experience
	for i, f := range calls {
		if !f.Failed() || recovered[f.StepIndex] {
			continue
		}
		j := i + 1
		for j < len(calls) && calls[j].Tool != f.Tool {
			j++
		}
		if j == len(calls) {
			continue
		}
		n := calls[j]
		if n.Failed() && templateOf(n) == templateOf(f) {
			continue
		}
		errText := errorText(f)
		d := diffArgs(f.Arguments, n.Arguments)
		// No lookup is credited here (no before, no others): the lesson
		// cites only the failure and the next call.
		r := &recovery{task: task, vals: vals, window: calls[i : j+1]}
		var rules, actions []string
		for _, k := range d.added {
			p, rest := namedPrefix(k, errText)
			rule := ""
			switch {
			case p == "":
				continue
			case rest == "":
				rule = r.added(k, d, nil, errText, n).rule
			case strings.HasPrefix(rest, "[]"):
				rule = fmt.Sprintf("pass %s (a list)", p)
			default:
				rule = fmt.Sprintf("pass %s (an object)", p)
			}
			if !slices.Contains(rules, rule) {
				rules, actions = append(rules, rule), append(actions, "added "+p)
			}
		}
		for _, k := range d.removed {
			if quotesName(errText, leafName(k)) {
				rules, actions = append(rules, "omit "+k), append(actions, "removed "+k)
			}
		}
		if len(rules) == 0 {
			continue
		}
		recovered[f.StepIndex] = true
		tpl := vals.abstractTemplate(templateOf(f))
		code := stepErrorCode(f)
		out = append(out, hindsight.Experience{
			Tool: f.Tool, Server: f.Server, ErrorCode: code, ErrorTemplate: tpl,
			Situation:   situation(f.Tool, code, tpl),
			Action:      strings.Join(actions, ", then ") + ", and called " + f.Tool + " again",
			Result:      f.Tool + " did not fail with this error on the next call",
			Lesson:      fmt.Sprintf("When %s fails with `%s`: %s.", f.Tool, tpl, strings.Join(rules, "; ")),
			SourceSteps: []int{f.StepIndex, n.StepIndex}, SourceAgent: f.ClientName, Origin: "rules",
			Confidence: unambiguousPrior,
		})
	}
	return out
}

// pathName matches the names in an argument path (files[].ranges[].start).
var pathName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[A-Za-z_][\w-]*`) })

// namedPrefix splits the argument path k after the first name in it that
// errText quotes: ("files[].ranges", "[].start") when the error quoted
// 'ranges'; "" when it quotes none.
func namedPrefix(k, errText string) (string, string) {
	for _, m := range pathName().FindAllStringIndex(k, -1) {
		if quotesName(errText, k[m[0]:m[1]]) {
			return k[:m[1]], k[m[1]:]
		}
	}
	return "", ""
}

// quotesName reports whether an error text quotes name: 'name', "name" or
// `name`.
func quotesName(errText, name string) bool {
	if len(name) < 2 {
		return false
	}
	for _, q := range []string{"'", `"`, "`"} {
		if strings.Contains(errText, q+name+q) {
			return true
		}
	}
	return false
}
