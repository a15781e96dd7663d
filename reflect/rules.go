package reflect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/hindsight-proxy/hindsight"
)

// Rules is the rule-based reflector: deterministic, offline, used when no
// LLM is configured and as a cross-check of the LLM's answer.
//
// From a failure followed by a recovery of the same tool it derives the
// lesson from what differed: arguments added, changed or removed, or
// another tool called in between (401, then login, then success: "call
// login before X"). Repeated identical failures, or a tool that failed on
// every call, yield an "avoid" lesson. Every lesson cites its steps.
type Rules struct{}

// Reflect implements Reflector.
func (Rules) Reflect(ctx context.Context, task *hindsight.Task) ([]hindsight.Experience, error) {
	calls := ToolCalls(task)
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
		s := calls[nextOK[i]]
		e, cited := recoveryLesson(calls[i:nextOK[i]+1], s)
		for _, c := range cited {
			recovered[c] = true
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	out = append(out, avoidLessons(calls, recovered)...)
	return out, nil
}

// recoveryLesson explains how the success s (the last of window) recovered
// from the failures of its tool before it in window.
func recoveryLesson(window []*hindsight.Step, s *hindsight.Step) (*hindsight.Experience, []int) {
	var fails, others []*hindsight.Step
	for _, c := range window[:len(window)-1] {
		switch {
		case c.Tool == s.Tool && c.Failed():
			fails = append(fails, c)
		case c.Tool != s.Tool && !c.Failed():
			others = append(others, c)
		}
	}
	last := fails[len(fails)-1]
	// Only the calls after the last failure can have made the difference.
	var before []string
	var cited []int
	for _, f := range fails {
		cited = append(cited, f.StepIndex)
	}
	for _, o := range others {
		if o.StepIndex > last.StepIndex && !slices.Contains(before, o.Tool) {
			before = append(before, o.Tool)
			cited = append(cited, o.StepIndex)
		}
	}
	cited = append(cited, s.StepIndex)
	sort.Ints(cited)

	d := diffArgs(last.Arguments, s.Arguments)
	code := stepErrorCode(last)
	failedWith := "failed"
	if code != "" {
		failedWith = "failed with " + code
	}
	e := &hindsight.Experience{
		Tool:        s.Tool,
		Server:      s.Server,
		ErrorCode:   code,
		Situation:   fmt.Sprintf("%s %s: %s", s.Tool, failedWith, Truncate(errorText(last), 120)),
		Result:      fmt.Sprintf("%s succeeded at step %d", s.Tool, s.StepIndex),
		SourceSteps: cited,
		SourceAgent: s.ClientName,
	}
	var rules, actions []string
	if len(before) > 0 {
		rules = append(rules, fmt.Sprintf("call %s before %s", strings.Join(before, " then "), s.Tool))
		actions = append(actions, fmt.Sprintf("called %s", strings.Join(before, ", ")))
	}
	if !d.empty() {
		rules = append(rules, d.rule(s.Tool))
		actions = append(actions, d.action())
	}
	switch {
	case len(rules) == 0 && len(fails) > 0:
		e.Lesson = fmt.Sprintf("%s can fail transiently (%s); retry the identical call once before changing anything", s.Tool, orUnknown(code))
		e.Action = "retried the identical call"
		e.Confidence = 0.65
	default:
		e.Lesson = upperFirst(strings.Join(rules, "; ")) + fmt.Sprintf(" (otherwise it %s)", failedWith) + "."
		e.Action = strings.Join(actions, ", then ") + ", and called " + s.Tool + " again"
		e.Confidence = 0.8
		if d.size() > 2 {
			e.Confidence = 0.7 // several changes at once: which one mattered is less sure
		}
	}
	return e, cited
}

// avoidLessons reports tools that failed repeatedly and never recovered.
func avoidLessons(calls []*hindsight.Step, recovered map[int]bool) []hindsight.Experience {
	type group struct {
		steps []*hindsight.Step
	}
	byTool := map[string]*group{}
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
		g := byTool[c.Tool]
		if g == nil {
			g = &group{}
			byTool[c.Tool] = g
			order = append(order, c.Tool)
		}
		g.steps = append(g.steps, c)
	}
	var out []hindsight.Experience
	for _, tool := range order {
		g := byTool[tool]
		if len(g.steps) < 2 {
			continue
		}
		first := g.steps[0]
		code := stepErrorCode(first)
		var cited []int
		for _, s := range g.steps {
			cited = append(cited, s.StepIndex)
		}
		e := hindsight.Experience{
			Tool: tool, Server: first.Server, ErrorCode: code,
			SourceSteps: cited, SourceAgent: first.ClientName,
			Result: fmt.Sprintf("all %d calls failed", len(g.steps)),
		}
		identical := true
		for _, s := range g.steps[1:] {
			if !bytes.Equal(canonical(s.Arguments), canonical(first.Arguments)) || stepErrorCode(s) != code {
				identical = false
			}
		}
		switch {
		case !succeeded[tool] && (!identical || len(g.steps) >= 3):
			e.Situation = fmt.Sprintf("%s failed on every call (%s): %s", tool, orUnknown(code), Truncate(errorText(first), 120))
			e.Action = fmt.Sprintf("called %s %d times with different arguments", tool, len(g.steps))
			if identical {
				e.Action = fmt.Sprintf("called %s %d times with the same arguments", tool, len(g.steps))
			}
			e.Lesson = fmt.Sprintf("Avoid %s: it failed with %s on all %d calls in this task; use another tool or ask the user.", tool, orUnknown(code), len(g.steps))
			e.Confidence = 0.7
			if len(g.steps) >= 3 {
				e.Confidence = 0.8
			}
		case identical:
			e.Situation = fmt.Sprintf("%s failed with %s: %s", tool, orUnknown(code), Truncate(errorText(first), 120))
			e.Action = fmt.Sprintf("repeated the identical call %d times", len(g.steps))
			e.Lesson = fmt.Sprintf("Avoid repeating %s with %s: the identical call failed %d times with %s.", tool, argsSummary(first.Arguments), len(g.steps), orUnknown(code))
			e.Confidence = 0.7
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

// argDiff is how the arguments of a recovery differ from the failure's.
type argDiff struct {
	added, removed []string
	changed        []string
	old, new       map[string]json.RawMessage
}

func diffArgs(failed, ok json.RawMessage) argDiff {
	d := argDiff{old: map[string]json.RawMessage{}, new: map[string]json.RawMessage{}}
	json.Unmarshal(failed, &d.old)
	json.Unmarshal(ok, &d.new)
	for k, v := range d.new {
		ov, had := d.old[k]
		switch {
		case !had:
			d.added = append(d.added, k)
		case !bytes.Equal(canonical(ov), canonical(v)):
			d.changed = append(d.changed, k)
		}
	}
	for k := range d.old {
		if _, ok := d.new[k]; !ok {
			d.removed = append(d.removed, k)
		}
	}
	sort.Strings(d.added)
	sort.Strings(d.removed)
	sort.Strings(d.changed)
	return d
}

func (d argDiff) empty() bool { return d.size() == 0 }
func (d argDiff) size() int   { return len(d.added) + len(d.removed) + len(d.changed) }

// rule states the difference as an instruction for calls of tool.
func (d argDiff) rule(tool string) string {
	var parts []string
	for _, k := range d.changed {
		o, n := shortValue(d.old[k]), shortValue(d.new[k])
		if f, g := valueShape(d.old[k]), valueShape(d.new[k]); f != "" && g != "" && f != g {
			parts = append(parts, fmt.Sprintf("pass %s in the form %s (like %s), not %s (like %s)", k, g, n, f, o))
			continue
		}
		parts = append(parts, fmt.Sprintf("set %s to %s, not %s", k, n, o))
	}
	for _, k := range d.added {
		parts = append(parts, fmt.Sprintf("pass %s (e.g. %s=%s)", k, k, shortValue(d.new[k])))
	}
	for _, k := range d.removed {
		parts = append(parts, fmt.Sprintf("omit %s", k))
	}
	return "when calling " + tool + ", " + strings.Join(parts, ", ")
}

func (d argDiff) action() string {
	var parts []string
	if len(d.changed) > 0 {
		parts = append(parts, "changed "+strings.Join(d.changed, ", "))
	}
	if len(d.added) > 0 {
		parts = append(parts, "added "+strings.Join(d.added, ", "))
	}
	if len(d.removed) > 0 {
		parts = append(parts, "removed "+strings.Join(d.removed, ", "))
	}
	return strings.Join(parts, ", ")
}

var digitRun = regexp.MustCompile(`\d+`)

// valueShape describes the format of a string value made of digits and
// separators ("2024-01-15" → "NNNN-NN-NN"), or "" for other values.
func valueShape(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) != nil || len(s) > 40 || !digitRun.MatchString(s) {
		return ""
	}
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			if r != 'T' && r != 'Z' {
				return ""
			}
		}
	}
	return digitRun.ReplaceAllStringFunc(s, func(m string) string { return strings.Repeat("N", len(m)) })
}

// shortValue renders an argument value for a lesson: JSON, cut to 60 bytes.
// Redacted values are named, never shown.
func shortValue(v json.RawMessage) string {
	s := string(compactJSON(v))
	if strings.Contains(s, "REDACTED") {
		return "(a secret)"
	}
	return Truncate(s, 60)
}

func argsSummary(args json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || len(m) == 0 {
		return "no arguments"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+shortValue(m[k]))
	}
	return Truncate(strings.Join(parts, " "), 160)
}

// canonical re-encodes JSON with sorted keys so equal values compare equal.
func canonical(b json.RawMessage) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

// errorText is the error message of a failed step: the JSON-RPC error's, or
// the text of an isError result.
func errorText(s *hindsight.Step) string {
	if s.Error != nil && s.Error.Message != "" {
		return s.Error.Message
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(s.Result, &r) == nil {
		for _, c := range r.Content {
			if c.Text != "" {
				return strings.Join(strings.Fields(c.Text), " ")
			}
		}
	}
	if s.CausalTag == hindsight.TagTimeout {
		return "timed out"
	}
	return "error"
}

func orUnknown(code string) string {
	if code == "" {
		return "an error"
	}
	return code
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
