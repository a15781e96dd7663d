package reflect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
	"github.com/hindsight-proxy/hindsight/guard"
)

// Rules is the rule-based reflector: deterministic, offline, used when no
// LLM is configured and as a cross-check of the LLM's answer.
//
// From a failure followed by a recovery of the same tool it derives the
// lesson from what differed, stated so that it helps a different task:
// argument names and paths, value shapes ("YYYY-MM-DD"), schema constants,
// the tool a changed id was taken from, and the error's template with its
// variable parts masked — never a value of this task. A call made between
// the failure and the recovery is a precondition only when the evidence
// contrasts: the tool had failed without it and succeeded after it, it is
// not a no-op (a "think" tool), and the error names it (else the lesson
// starts below the injection gate and needs other tasks to confirm it).
// A failure whose error quoted an argument's name, which the next call of
// the tool added or dropped, teaches that change even before the task
// recovers (partialLessons). Repeated failures that never recovered yield
// a "do not retry" lesson.
// Every lesson cites its steps and carries its error template.
type Rules struct{}

// Reflect implements Reflector.
func (Rules) Reflect(ctx context.Context, task *hindsight.Task) ([]hindsight.Experience, error) {
	calls := ToolCalls(task)
	vals := newTaskValues(task)
	// nextOK[i] is the position of the next success of calls[i]'s tool.
	nextOK := make([]int, len(calls))
	seen := map[string]int{}
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		nextOK[i] = -1
		if j, ok := seen[c.Tool]; ok {
			nextOK[i] = j
		}
		if !c.Failed() {
			seen[c.Tool] = i
		}
	}
	var out []hindsight.Experience
	recovered := map[int]bool{} // step indices explained by a recovery lesson
	for i := 0; i < len(calls); i++ {
		f := calls[i]
		if !f.Failed() || recovered[f.StepIndex] || nextOK[i] < 0 {
			continue
		}
		r := recovery{task: task, vals: vals, before: calls[:i], window: calls[i : nextOK[i]+1]}
		e, cited := r.lesson()
		for _, c := range cited {
			recovered[c] = true
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	out = append(out, partialLessons(task, calls, vals, recovered)...)
	out = append(out, giveUpLessons(calls, recovered, vals)...)
	return out, nil
}

// templateOf is the error template of a failed step: the one the daemon's
// miner gave it, else its error text masked, with the quoted names that
// are no value of its call kept (keepNames).
func templateOf(s *hindsight.Step) string {
	if s.ErrorTemplate != "" {
		return s.ErrorTemplate
	}
	text := errorText(s)
	return keepNames(errtemplate.Mask(text), text, stepValues(s))
}

// maxQuoted is how many bytes of a server's error template a lesson
// quotes.
const maxQuoted = 160

// fence fences a server's error template as data inside Hindsight's own
// sentence: invisible and control characters removed, white space
// collapsed, back quotes (which would close the fence and put the rest in
// the instruction position) replaced, cut to maxQuoted bytes. What it
// says is validated with the whole lesson (poisoned).
func fence(tpl string) string {
	tpl = strings.Join(strings.Fields(guard.Clean(tpl)), " ")
	return "`" + Truncate(strings.ReplaceAll(tpl, "`", "'"), maxQuoted) + "`"
}

// recovery is one failure-then-success window of a tool.
type recovery struct {
	task   *hindsight.Task
	vals   *taskValues
	before []*hindsight.Step // the task's calls before the window
	window []*hindsight.Step // first failure … the success
}

// lesson explains how the success that ends the window recovered from the
// failures of its tool before it.
func (r *recovery) lesson() (*hindsight.Experience, []int) {
	s := r.window[len(r.window)-1]
	var fails, others []*hindsight.Step
	for _, c := range r.window[:len(r.window)-1] {
		switch {
		case c.Tool == s.Tool && c.Failed():
			fails = append(fails, c)
		case c.Tool != s.Tool && !c.Failed():
			others = append(others, c)
		}
	}
	last := fails[len(fails)-1]
	var cited []int
	for _, f := range fails {
		cited = append(cited, f.StepIndex)
	}
	tpl := r.vals.abstractTemplate(templateOf(last))
	errText := errorText(last)
	code := stepErrorCode(last)
	e := &hindsight.Experience{
		Tool:          s.Tool,
		Server:        s.Server,
		ErrorCode:     code,
		ErrorTemplate: tpl,
		Situation:     situation(s.Tool, code, tpl),
		Result:        s.Tool + " succeeded on the next call",
		SourceAgent:   s.ClientName,
		Origin:        "rules",
	}
	d := diffArgs(last.Arguments, s.Arguments)
	var fixes []fix
	for _, k := range d.changed {
		fixes = append(fixes, r.changed(k, d, others, errText, s))
	}
	for _, k := range d.added {
		fixes = append(fixes, r.added(k, d, others, errText, s))
	}
	for _, k := range d.removed {
		fixes = append(fixes, fix{
			rule:        "omit " + k,
			action:      "removed " + k,
			unambiguous: namesArg(errText, leafName(k), d.old[k]),
		})
	}
	// When the error grounds some of several changes (it names the
	// argument, or asks for a format), the others were incidental.
	if slices.ContainsFunc(fixes, fix.grounded) {
		fixes = slices.DeleteFunc(fixes, func(f fix) bool { return !f.grounded() })
	}
	// A call between the last failure and the success is a precondition
	// only when nothing in the arguments explains the recovery, or the
	// error names it.
	var pre []*hindsight.Step
	for _, o := range others {
		if o.StepIndex < last.StepIndex || slices.ContainsFunc(pre, func(p *hindsight.Step) bool { return p.Tool == o.Tool }) {
			continue
		}
		if r.calledBefore(o.Tool, fails[0]) || slices.ContainsFunc(fixes, func(f fix) bool { return slices.Contains(f.cites, o.StepIndex) }) {
			continue // no precondition: it failed with it, or a fix names it
		}
		named := namesTool(errText, o.Tool)
		if named || (len(fixes) == 0 && !r.noop(o.Tool)) {
			pre = append(pre, o)
		}
	}
	for _, p := range pre {
		cited = append(cited, p.StepIndex)
	}
	for _, f := range fixes {
		cited = append(cited, f.cites...)
	}
	cited = append(cited, s.StepIndex)
	slices.Sort(cited)
	cited = slices.Compact(cited)
	e.SourceSteps = cited

	var rules, actions []string
	unambiguous := len(fixes)+len(pre) > 0
	if len(pre) > 0 {
		var names []string
		named := false
		for _, p := range pre {
			names = append(names, p.Tool)
			named = named || namesTool(errText, p.Tool)
		}
		rules = append(rules, fmt.Sprintf("call %s before %s", strings.Join(names, " then "), s.Tool))
		actions = append(actions, "called "+strings.Join(names, ", "))
		unambiguous = unambiguous && named
	}
	for _, f := range fixes {
		rules = append(rules, f.rule)
		actions = append(actions, f.action)
		unambiguous = unambiguous && f.unambiguous
	}
	if len(fixes) > 1 && !slices.ContainsFunc(fixes, func(f fix) bool { return !f.format }) {
		// Several values reshaped the same way at once (time_min and
		// time_max) are one change of format.
	} else if len(fixes) > 1 {
		unambiguous = false // several changes at once: which one mattered is unsure
	}
	failedWith := "fails"
	if tpl != "" {
		failedWith = "fails with " + fence(tpl)
	}
	switch {
	case len(rules) == 0:
		e.Lesson = fmt.Sprintf("When %s %s, retry the identical call once before changing anything: it can fail transiently.", s.Tool, failedWith)
		e.Action = "retried the identical call"
		unambiguous = transientCue().MatchString(errText)
	case len(pre) > 0 && len(fixes) == 0:
		e.Lesson = upperFirst(rules[0]) + fmt.Sprintf(" (otherwise %s %s).", s.Tool, failedWith)
		e.Action = strings.Join(actions, ", then ") + ", and called " + s.Tool + " again"
	default:
		e.Lesson = fmt.Sprintf("When %s %s: %s.", s.Tool, failedWith, strings.Join(rules, "; "))
		e.Action = strings.Join(actions, ", then ") + ", and called " + s.Tool + " again"
	}
	e.Confidence = singlePrior
	if unambiguous {
		e.Confidence = unambiguousPrior
	}
	return e, cited
}

// situation is an experience's situation: the tool, the error code and the
// error's template, never its raw text.
func situation(tool, code, tpl string) string {
	s := tool + " failed"
	if code != "" {
		s += " with " + code
	}
	if tpl != "" {
		s += ": `" + tpl + "`"
	}
	return s
}

// fix is one argument change that a recovery made, stated as a rule.
type fix struct {
	rule, action string
	unambiguous  bool  // the error text grounds it
	named        bool  // the error names its argument (grounds which change mattered, not the fix)
	format       bool  // a change of a value's shape
	cites        []int // steps it rests on besides the failure and success
}

// grounded reports whether the error text points at f's argument or fix.
func (f fix) grounded() bool { return f.unambiguous || f.named }

// changed states the change of argument k.
func (r *recovery) changed(k string, d argDiff, others []*hindsight.Step, errText string, s *hindsight.Step) fix {
	ov, nv := d.old[k], d.new[k]
	named := namesArg(errText, leafName(k), ov)
	if f, g := shapeOf(ov), shapeOf(nv); f != "" && g != "" && f != g {
		return fix{
			rule:        fmt.Sprintf("pass %s as %s, not %s", k, g, f),
			action:      fmt.Sprintf("changed the format of %s", k),
			unambiguous: named || shapeNamed(errText, g),
			format:      true,
		}
	}
	// Taken from another call's result: an id the agent looked up.
	if src := r.sourceOf(nv, ov, others, s.Server); src != nil {
		rule := fmt.Sprintf("the %s passed was not a valid one; take %s from the result of %s instead of guessing or reusing it", k, k, src.Tool)
		if r.lookedUp(src) {
			rule = fmt.Sprintf("call %s first to get a valid %s, and take %s from its result instead of guessing or reusing one", src.Tool, k, k)
		}
		return r.fromLookup(rule, k, src, errText, named)
	}
	// Names inside it taken from a lookup made to recover: a table name in
	// a query, a file name in a path.
	if src := r.partSourceOf(nv, ov, others, s.Server); src != nil {
		rule := fmt.Sprintf("call %s first and take the names in %s from its result instead of guessing them", src.Tool, k)
		return r.fromLookup(rule, k, src, errText, named)
	}
	enum := schemaEnum(r.task, s.Tool, leafName(k))
	nvs, ovs := scalarOf(nv), scalarOf(ov)
	if slices.Contains(enum, nvs) {
		rule := fmt.Sprintf("set %s to one of the values its schema allows (%s); %q worked", k, strings.Join(quoteAll(enum, 6), ", "), nvs)
		if slices.Contains(enum, ovs) {
			rule += fmt.Sprintf(" where %q failed", ovs)
		}
		return fix{rule: rule, action: "changed " + k, unambiguous: named}
	}
	if listed := listedValues(errText); named && slices.Contains(listed, nvs) {
		// The constraint the error states, checked against the retry:
		// the value that worked is one it lists.
		return fix{
			rule:        fmt.Sprintf("set %s to one of the values the error lists (%s); %q worked", k, strings.Join(quoteAll(listed, 8), ", "), nvs),
			action:      "changed " + k,
			unambiguous: true,
		}
	}
	if named && listCue().MatchString(errText) {
		return fix{
			rule:        fmt.Sprintf("set %s to one of the values the error lists", k),
			action:      "changed " + k,
			unambiguous: true,
		}
	}
	return fix{
		rule:   fmt.Sprintf("the %s value was rejected; pass a different, valid %s", k, k),
		action: "changed " + k,
		named:  named,
	}
}

// listedValues returns the values an error text lists after a listCue
// ("must be one of: US, GB, DE"), each a short token without quotes or
// brackets; nil when it lists none.
func listedValues(errText string) []string {
	loc := listCue().FindStringIndex(errText)
	if loc == nil {
		return nil
	}
	head := listHead().FindString(errText[loc[0]:loc[1]])
	rest := errText[loc[0]+len(head):]
	if end := listEnd().FindStringIndex(rest); end != nil {
		rest = rest[:end[0]]
	}
	var out []string
	for _, item := range listSep().Split(rest, -1) {
		item = strings.Trim(item, " \t:[]{}()'\"`.")
		if item == "" || len(item) > 40 || strings.ContainsAny(item, " \t") {
			return nil
		}
		out = append(out, item)
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

var (
	listHead = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)^(one of|allowed(?: values)?(?: are| is)?|valid (?:values|options|choices)(?: are)?|must be(?: either)?|expected|supported(?: values)?(?: are)?|possible values(?: are)?|choose from)`)
	})
	listEnd = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[.;]\s|[.;"}]*$|\n`) })
	listSep = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s*(?:,|\bor\b|\|)\s*`) })
)

// listCue matches error texts that list the allowed values: a cue ("one
// of", "allowed values", "must be", "expected", "supported") followed by
// at least two items joined by commas, "or" or bars. A cue alone ("not
// allowed", "must be a string") lists nothing.
var listCue = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(one of|allowed(?: values)?(?: are| is)?|valid (?:values|options|choices)(?: are)?|must be(?: either)?|expected|supported(?: values)?(?: are)?|possible values(?: are)?|choose from)\W{0,4}[\w.'"-]+['"]?\s*(?:,|\bor\b|\|)\s*\W?[\w.-]+`)
})

// shapeNamed reports whether an error text names the value shape shape:
// "expected YYYY-MM-DD", "not an RFC 3339 timestamp".
func shapeNamed(errText, shape string) bool {
	low := strings.ToLower(errText)
	for _, notation := range shapeNotation().FindAllString(shape, -1) {
		if strings.Contains(low, strings.ToLower(notation)) {
			return true
		}
	}
	switch {
	case strings.Contains(shape, "RFC 3339"):
		return strings.Contains(low, "rfc 3339") || strings.Contains(low, "rfc3339") || strings.Contains(low, "8601")
	case strings.Contains(shape, "YYYY-MM-DD"):
		return strings.Contains(low, "8601") || strings.Contains(low, "iso date")
	}
	return false
}

// shapeNotation finds the notations in a shape's name: YYYY-MM-DD, HH:MM…
var shapeNotation = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[YMDHS]{2,4}(?:[-/.: T][YMDHS]{2,4})+`) })

// added states the addition of argument k.
func (r *recovery) added(k string, d argDiff, others []*hindsight.Step, errText string, s *hindsight.Step) fix {
	what := kindOf(d.new[k])
	if sh := shapeOf(d.new[k]); sh != "" && !strings.HasPrefix(sh, "a JSON") {
		what = sh
	}
	if enum := schemaEnum(r.task, s.Tool, leafName(k)); len(enum) > 0 {
		what = "one of " + strings.Join(quoteAll(enum, 6), ", ")
	}
	if v := scalarOf(d.new[k]); v != "" && r.vals.prescribed[v] {
		// The error asked for this very value ("retry after 300 ms").
		return fix{
			rule:        fmt.Sprintf("pass %s=%s, as the error asks", k, v),
			action:      "added " + k,
			unambiguous: true,
		}
	}
	// Its value came from another call's result: a project, a sheet, a
	// schema's field the agent looked up.
	if src := r.sourceOf(d.new[k], nil, others, s.Server); src != nil {
		rule := fmt.Sprintf("pass %s, taken from the result of %s", k, src.Tool)
		if r.lookedUp(src) {
			rule = fmt.Sprintf("call %s first to get %s, and pass the %s its result gives", src.Tool, k, k)
		}
		f := r.fromLookup(rule, k, src, errText, namesArg(errText, leafName(k), nil))
		f.action = fmt.Sprintf("added %s from %s's result", k, src.Tool)
		return f
	}
	return fix{
		rule:        fmt.Sprintf("pass %s (%s)", k, what),
		action:      "added " + k,
		unambiguous: namesArg(errText, leafName(k), nil),
	}
}

// sourceOf returns the successful call among others whose result holds
// the new value nv but not the old ov: where the agent found a valid id.
func (r *recovery) sourceOf(nv, ov json.RawMessage, others []*hindsight.Step, server string) *hindsight.Step {
	n, o := scalarOf(nv), scalarOf(ov)
	if len(n) < 3 || n == o || shapeOf(nv) == "YYYY-MM-DD" {
		return nil
	}
	cands := append(slices.Clone(others), r.before...)
	for _, c := range cands {
		if c.Failed() || c.Server != server || r.noop(c.Tool) {
			continue
		}
		res := foundText(c)
		if containsToken(res, n) && (o == "" || !containsToken(res, o)) {
			return c
		}
	}
	return nil
}

// partSourceOf returns the successful call made after the first failure
// (a lookup to recover) whose result holds a name of the new value nv
// that the old value ov did not hold: "accounts" of `SELECT * FROM
// accounts` from list_tables, "report_q3.csv" of a path from
// list_directory. Names are runs of letters, digits, _ . and - with a
// letter, three characters or more.
func (r *recovery) partSourceOf(nv, ov json.RawMessage, others []*hindsight.Step, server string) *hindsight.Step {
	old := map[string]bool{}
	for _, w := range nameRun().FindAllString(scalarOf(ov), -1) {
		old[w] = true
	}
	var fresh []string
	for _, w := range nameRun().FindAllString(scalarOf(nv), -1) {
		if !old[w] && strings.IndexFunc(w, unicode.IsLetter) >= 0 && !r.vals.names[w] {
			fresh = append(fresh, w)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	for _, c := range others {
		if c.Failed() || c.Server != server || !r.lookedUp(c) || r.noop(c.Tool) {
			continue
		}
		res := foundText(c)
		if slices.ContainsFunc(fresh, func(w string) bool { return containsToken(res, w) }) {
			return c
		}
	}
	return nil
}

var nameRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[\pL\pN_.-]{3,}`) })

// lookedUp reports whether src, the call a recovery took a value from,
// came after the first failure of the window: the agent made a discovery
// call (list what is allowed, look up an id, read a schema) to recover.
func (r *recovery) lookedUp(src *hindsight.Step) bool {
	return src.StepIndex > r.window[0].StepIndex
}

// fromLookup is the fix of argument k whose new value the result of src
// held, stated as rule. It rests on src's step; the error grounds it when
// it names src (unambiguous) or the argument (named).
func (r *recovery) fromLookup(rule, k string, src *hindsight.Step, errText string, named bool) fix {
	return fix{
		rule:        rule,
		action:      fmt.Sprintf("took %s from %s's result", k, src.Tool),
		cites:       []int{src.StepIndex},
		named:       named,
		unambiguous: namesTool(errText, src.Tool),
	}
}

// noop reports whether tool's calls in the task returned nothing of
// substance: a "think" or "note" tool whose results are empty or "ok".
func (r *recovery) noop(tool string) bool {
	switch strings.ToLower(tool) {
	case "think", "note", "notes", "plan", "reflect", "log", "sleep", "wait", "noop":
		return true
	}
	n := 0
	for i := range r.task.Steps {
		s := &r.task.Steps[i]
		if s.Tool != tool || s.Method != "tools/call" || s.Failed() {
			continue
		}
		n++
		if substantial(s) {
			return false
		}
	}
	return n > 0
}

// calledBefore reports whether tool succeeded before step first: then the
// failure happened with it, and it cannot be what made the difference.
func (r *recovery) calledBefore(tool string, first *hindsight.Step) bool {
	return slices.ContainsFunc(r.before, func(c *hindsight.Step) bool {
		return c.Tool == tool && !c.Failed() && c.StepIndex < first.StepIndex
	})
}

// giveUpLessons reports tools that failed repeatedly with one error and
// never recovered: the agent should stop retrying.
func giveUpLessons(calls []*hindsight.Step, recovered map[int]bool, vals *taskValues) []hindsight.Experience {
	type group struct{ steps []*hindsight.Step }
	groups := map[string]*group{}
	var order []string
	succeeded := map[string]bool{}
	for _, c := range calls {
		if !c.Failed() {
			succeeded[c.Tool] = true
			continue
		}
		if recovered[c.StepIndex] {
			continue
		}
		k := c.Tool + "\x00" + templateOf(c)
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.steps = append(g.steps, c)
	}
	var out []hindsight.Experience
	for _, k := range order {
		g := groups[k]
		if len(g.steps) < 2 {
			continue
		}
		first := g.steps[0]
		tool, code := first.Tool, stepErrorCode(first)
		tpl := vals.abstractTemplate(templateOf(first))
		var cited []int
		identical := true
		for _, s := range g.steps {
			cited = append(cited, s.StepIndex)
			if !bytes.Equal(canonical(s.Arguments), canonical(first.Arguments)) {
				identical = false
			}
		}
		e := hindsight.Experience{
			Tool: tool, Server: first.Server, ErrorCode: code, ErrorTemplate: tpl,
			Situation:   situation(tool, code, tpl),
			SourceSteps: cited, SourceAgent: first.ClientName, Origin: "rules",
			Result:     fmt.Sprintf("%s never succeeded after this error in the task", tool),
			Confidence: singlePrior,
		}
		switch {
		case identical:
			e.Action = "repeated the identical call"
			e.Lesson = fmt.Sprintf("When %s fails with %s, do not repeat the identical call: repeating it failed the same way; change the arguments, use another tool or ask the user.", tool, fence(tpl))
		case !succeeded[tool] || len(g.steps) >= 3:
			e.Action = "called " + tool + " again with other arguments"
			e.Lesson = fmt.Sprintf("When %s fails with %s, stop retrying it: other arguments failed the same way; use another tool or ask the user.", tool, fence(tpl))
			if floodCue().MatchString(errorText(first)) {
				// The error says the calls come too fast: it grounds
				// "stop retrying" by itself.
				e.Confidence = unambiguousPrior
			}
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}
