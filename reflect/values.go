package reflect

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/errtemplate"
)

// taskValues are the values of one task: every string and number in its
// tool calls' arguments and results, and the value-like tokens (with a
// digit or an @) of their texts. A lesson that quotes one of them quotes
// something that belonged to this task, unless the tool's schema names it
// as a constant (schema).
type taskValues struct {
	values map[string]bool
	schema map[string]bool // enum and const values from tools/list results
	names  map[string]bool // tool and argument names
	tools  map[string]bool // the tools the task called
	codes  map[string]bool // error codes of failed steps and their numbers
	// prescribed are the values that the server's own error texts
	// introduced: found in an error text, but in no argument sent up to
	// that failure and in no successful result ("Retry after 300 ms").
	prescribed map[string]bool
}

func newTaskValues(task *hindsight.Task) *taskValues {
	v := &taskValues{values: map[string]bool{}, schema: map[string]bool{}, names: map[string]bool{}, tools: map[string]bool{}, codes: map[string]bool{}, prescribed: map[string]bool{}}
	known := &taskValues{values: map[string]bool{}, names: map[string]bool{}} // sent or returned so far
	for i := range task.Steps {
		s := &task.Steps[i]
		switch {
		case s.Method == "tools/list":
			collectSchema(s.Result, v.schema, v.names)
		case s.Method == "tools/call" && !s.Local:
			v.names[s.Tool] = true
			v.tools[s.Tool] = true
			var args any
			if json.Unmarshal(s.Arguments, &args) == nil {
				v.walk(args, true)
				known.walk(args, true)
			}
			if s.Failed() {
				// An error message is the server's text, not a value: only
				// the value-like tokens in it count, and those no call sent
				// or got back before are the server's own prescription.
				// Error codes name kinds of failure, not data.
				if code := stepErrorCode(s); code != "" {
					v.codes[code] = true
					for _, part := range digitRun().FindAllString(code, -1) {
						v.codes[part] = true
					}
				}
				text := errorText(s)
				for _, tok := range valueTokens(text) {
					v.values[tok] = true
				}
				for _, tok := range append(prescriptions(text), listedValues(text)...) {
					if !known.values[tok] {
						v.prescribed[tok] = true
					}
				}
				continue
			}
			var res any
			if json.Unmarshal(s.Result, &res) == nil {
				v.walk(res, false)
				known.walk(res, false)
			}
		}
	}
	return v
}

var digitRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+`) })

// identRun matches identifiers: letters, digits, _ and ., with a letter
// first.
var identRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\pL[\pL\pN_.]*[\pL\pN]`) })

// prescriptive matches a value an error text tells the caller to use:
// "retry after 300 ms", "pass pause_ms=300", "expected one of 10, 20",
// "at most 50".
var prescriptive = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(?:after|pass|use|set|expected|expecting|e\.g\.|like|try|must be|should be|at most|at least|max(?:imum)?|min(?:imum)?|limit(?: is)?|one of|[a-z_]+=)\s*([^\s,;()]+)`)
})

// prescriptions returns the values an error text prescribes.
func prescriptions(text string) []string {
	var out []string
	for _, m := range prescriptive().FindAllStringSubmatch(text, -1) {
		out = append(out, valueTokens(m[1])...)
		if eq := strings.LastIndexByte(m[0], '='); eq >= 0 {
			out = append(out, valueTokens(m[0][eq+1:])...)
		}
	}
	return out
}

// valueTokens returns the value-like tokens of a text, without the
// punctuation around them, split at = and :.
func valueTokens(s string) []string {
	var out []string
	for _, tok := range valueToken().FindAllString(s, -1) {
		for _, part := range strings.FieldsFunc(tok, func(r rune) bool { return r == '=' }) {
			part = strings.Trim(part, ".,;:()[]{}\"'`")
			if part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// walk adds the leaves of x; keys of argument objects are names.
func (v *taskValues) walk(x any, args bool) {
	switch x := x.(type) {
	case map[string]any:
		for k, y := range x {
			if args {
				v.names[k] = true
			}
			v.walk(y, args)
		}
	case []any:
		for _, y := range x {
			v.walk(y, args)
		}
	case string:
		s := strings.TrimSpace(x)
		if s == "" {
			return
		}
		if len(s) <= 80 {
			v.values[s] = true
		}
		for _, tok := range valueTokens(s) {
			v.values[tok] = true
		}
		// A snake_case or dotted identifier inside an argument (a table in
		// a query, a column, a sheet) is this task's wherever it shows up.
		if args {
			for _, tok := range identRun().FindAllString(s, -1) {
				if strings.ContainsAny(strings.Trim(tok, "._"), "._") {
					v.values[tok] = true
				}
			}
		}
		// JSON inside text results (a common shape) holds values too.
		if strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[") {
			var y any
			if json.Unmarshal([]byte(s), &y) == nil {
				v.walk(y, false)
			}
		}
	case float64:
		v.values[strconv.FormatFloat(x, 'f', -1, 64)] = true
	}
}

// valueToken matches the tokens of a text that look like values: with a
// digit or an @ in them.
var valueToken = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`[^\s,;()\[\]{}"'` + "`" + `]*[\d@][^\s,;()\[\]{}"'` + "`" + `]*`)
})

// collectSchema adds the enum and const values of a tools/list result's
// input schemas to consts, and tool and property names to names.
func collectSchema(result json.RawMessage, consts, names map[string]bool) {
	var r struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	for _, t := range r.Tools {
		names[t.Name] = true
		schemaWalk(t.InputSchema, consts, names)
	}
}

func schemaWalk(x any, consts, names map[string]bool) {
	switch x := x.(type) {
	case map[string]any:
		for k, y := range x {
			switch k {
			case "enum":
				if list, ok := y.([]any); ok {
					for _, c := range list {
						consts[scalarString(c)] = true
					}
				}
			case "const", "default":
				consts[scalarString(y)] = true
			case "properties":
				if props, ok := y.(map[string]any); ok {
					for name := range props {
						names[name] = true
					}
				}
			}
			schemaWalk(y, consts, names)
		}
	case []any:
		for _, y := range x {
			schemaWalk(y, consts, names)
		}
	}
}

func scalarString(x any) string {
	switch x := x.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

// schemaEnum returns the enum of argument name in tool's input schema, as
// recorded by a tools/list result in task.
func schemaEnum(task *hindsight.Task, tool, name string) []string {
	for i := range task.Steps {
		s := &task.Steps[i]
		if s.Method != "tools/list" {
			continue
		}
		var r struct {
			Tools []struct {
				Name        string `json:"name"`
				InputSchema struct {
					Properties map[string]struct {
						Enum []any `json:"enum"`
					} `json:"properties"`
				} `json:"inputSchema"`
			} `json:"tools"`
		}
		if json.Unmarshal(s.Result, &r) != nil {
			continue
		}
		for _, t := range r.Tools {
			if t.Name != tool {
				continue
			}
			var out []string
			for _, e := range t.InputSchema.Properties[name].Enum {
				out = append(out, scalarString(e))
			}
			return out
		}
	}
	return nil
}

// formatNames are the numbers in the names of standard formats, which a
// lesson may cite whatever its task ("an RFC 3339 date-time").
var formatNames = map[string]bool{"3339": true, "8601": true, "RFC3339": true, "ISO8601": true, "E.164": true, "E164": true}

// oneOff reports whether the literal lit (a token or quoted text of a
// lesson) is one of the task's own values and not a schema constant, a
// tool or an argument name.
func (v *taskValues) oneOff(lit string) bool {
	lit = strings.TrimSpace(lit)
	if lit == "" || v.schema[lit] || v.names[lit] || v.codes[lit] || v.prescribed[lit] || formatNames[lit] || lit == errtemplate.Wildcard {
		return false
	}
	return v.values[lit]
}

// literals returns the tokens of text a lesson could quote a value with:
// quoted runs (without their quotes) and tokens with a digit or an @.
func literals(text string) []string {
	var out []string
	for _, q := range quotedRun().FindAllString(text, -1) {
		inner := q[1 : len(q)-1]
		if !strings.Contains(inner, errtemplate.Wildcard) {
			out = append(out, inner)
		}
		out = append(out, valueTokens(inner)...)
	}
	return append(out, valueTokens(quotedRun().ReplaceAllString(text, " "))...)
}

var quotedRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("\"[^\"]*\"|`[^`]*`|'[^'\\s][^']*'") })

// datumLike reports whether a word of an error text looks like data
// rather than the server's wording: it has a digit, an @ or a separator
// (an id, a slug, a path), a capital letter (a name), or is long.
func datumLike(w string) bool {
	return strings.ContainsAny(w, "0123456789@-_./") || strings.ToLower(w) != w || len(w) >= 12
}

// abstractTemplate masks, in a template, every token that is one of the
// task's own values the template miner kept (a name seen once, say).
func (v *taskValues) abstractTemplate(tpl string) string {
	toks := strings.Fields(tpl)
	for i, t := range toks {
		core := strings.Trim(t, ".,;:()[]{}\"'`")
		if core != "" && core != errtemplate.Wildcard && v.oneOff(core) && !v.names[core] && datumLike(core) {
			toks[i] = strings.Replace(t, core, errtemplate.Wildcard, 1)
		}
	}
	return strings.Join(toks, " ")
}

// TaskValues returns the values of task that a lesson must not quote: its
// arguments' and results' values, less schema constants and names.
func TaskValues(task *hindsight.Task) map[string]bool {
	v := newTaskValues(task)
	out := map[string]bool{}
	for x := range v.values {
		if v.oneOff(x) {
			out[x] = true
		}
	}
	return out
}

// Literals returns the tokens of a text that could quote a value: quoted
// runs and tokens with a digit or an @.
func Literals(text string) []string { return literals(text) }

// ErrorText is the error message of a failed step: its JSON-RPC error's
// message, or the first text item of its isError result.
func ErrorText(s *hindsight.Step) string { return errorText(s) }
