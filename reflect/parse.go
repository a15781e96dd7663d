package reflect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hindsight-proxy/hindsight"
)

// ErrMalformed is returned when a model's answer holds no usable JSON.
var ErrMalformed = errors.New("malformed answer")

// ParseExperiences reads the experiences in a model's answer. It accepts
// what models actually send: the object the JSON schema asks for
// ({"experiences": [...]}), a bare array, a single experience object, any of
// these inside a Markdown code fence or surrounded by prose, numbers sent as
// strings, a confidence in percent, and step lists sent as a string
// ("3, 4") or a single number.
//
// An answer with an empty list yields no experiences and no error. An
// answer without any JSON value, or whose items are not objects, yields an
// error wrapping ErrMalformed.
func ParseExperiences(answer string) ([]hindsight.Experience, error) {
	v, err := findJSON(answer)
	if err != nil {
		return nil, err
	}
	items, err := experienceItems(v)
	if err != nil {
		return nil, err
	}
	out := make([]hindsight.Experience, 0, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: item %d is %s, not an object", ErrMalformed, i, jsonKind(it))
		}
		out = append(out, experienceFromMap(m))
	}
	return out, nil
}

// findJSON returns the first JSON object or array in s that decodes,
// looking inside code fences first.
func findJSON(s string) (any, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: empty answer", ErrMalformed)
	}
	candidates := fenced(s)
	candidates = append(candidates, s)
	for _, c := range candidates {
		// Each failed start costs a scan: bound them for hostile answers.
		for start, tries := 0, 0; start < len(c) && tries < 64; tries++ {
			i := strings.IndexAny(c[start:], "{[")
			if i < 0 {
				break
			}
			start += i
			dec := json.NewDecoder(strings.NewReader(c[start:]))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err == nil {
				if _, isArr := v.([]any); !isArr || arrayOfObjectsOrEmpty(v.([]any)) {
					return v, nil
				}
			}
			start++
		}
	}
	return nil, fmt.Errorf("%w: no JSON object or array in %d bytes", ErrMalformed, len(s))
}

// arrayOfObjectsOrEmpty tells a list of experiences from a stray bracket
// in prose ("[1]" in a footnote is skipped, "[]" is an empty answer).
func arrayOfObjectsOrEmpty(a []any) bool {
	if len(a) == 0 {
		return true
	}
	_, ok := a[0].(map[string]any)
	return ok
}

// fenced returns the bodies of the Markdown code fences in s.
func fenced(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "```")
		if i < 0 {
			return out
		}
		rest := s[i+3:]
		// Skip the info string ("json") up to the end of the line.
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 && !strings.ContainsAny(rest[:nl], "{[") {
			rest = rest[nl+1:]
		}
		j := strings.Index(rest, "```")
		if j < 0 {
			return append(out, rest)
		}
		out = append(out, rest[:j])
		s = rest[j+3:]
	}
}

// experienceItems finds the list of experiences in a decoded answer.
func experienceItems(v any) ([]any, error) {
	switch v := v.(type) {
	case []any:
		return v, nil
	case map[string]any:
		for _, k := range []string{"experiences", "lessons", "items", "results", "data"} {
			if x, ok := lookup(v, k); ok {
				switch x := x.(type) {
				case []any:
					return x, nil
				case map[string]any:
					return []any{x}, nil
				case nil:
					return nil, nil
				default:
					return nil, fmt.Errorf("%w: %q is %s, not a list", ErrMalformed, k, jsonKind(x))
				}
			}
		}
		if x, ok := lookup(v, "experience"); ok {
			if m, ok := x.(map[string]any); ok {
				return []any{m}, nil
			}
		}
		if _, ok := lookup(v, "lesson"); ok {
			return []any{v}, nil
		}
		if len(v) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: object has no experiences", ErrMalformed)
	}
	return nil, fmt.Errorf("%w: answer is %s", ErrMalformed, jsonKind(v))
}

// lookup finds key in m, ignoring case.
func lookup(m map[string]any, key string) (any, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

func experienceFromMap(m map[string]any) hindsight.Experience {
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := lookup(m, k); ok {
				if s := asString(v); s != "" {
					return s
				}
			}
		}
		return ""
	}
	e := hindsight.Experience{
		Situation: str("situation", "context", "when"),
		Action:    str("action"),
		Result:    str("result", "outcome"),
		Lesson:    str("lesson", "rule"),
		Tool:      str("tool", "tool_name"),
		ErrorCode: str("error_code", "error"),
		TaskType:  str("task_type"),
	}
	e.Confidence = math.NaN()
	if v, ok := lookup(m, "confidence"); ok {
		e.Confidence = asConfidence(v)
	}
	for _, k := range []string{"source_steps", "steps", "step_indices", "source_step_indices"} {
		if v, ok := lookup(m, k); ok {
			e.SourceSteps = asInts(v)
			break
		}
	}
	return e
}

// asString renders scalars as text; objects and arrays become compact JSON.
func asString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// asConfidence reads a confidence as a number in [0, 1]; percentages
// ("80", "80%") are scaled. It returns NaN when v is not a number.
func asConfidence(v any) float64 {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = v.String()
	case string:
		s = strings.TrimSpace(v)
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return math.NaN()
	}
	pct := strings.HasSuffix(s, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return math.NaN()
	}
	if pct || (f > 1 && f <= 100) {
		f /= 100
	}
	return f
}

// asInts reads step indices from a list, a number, or a string of numbers
// separated by commas, spaces or '#'.
func asInts(v any) []int {
	var out []int
	add := func(s string) {
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '#' || r == ';' || r == '[' || r == ']' }) {
			if n, err := strconv.ParseFloat(f, 64); err == nil && n == math.Trunc(n) && math.Abs(n) < 1e9 {
				out = append(out, int(n))
			} else {
				out = append(out, -1) // not a step index: invented
			}
		}
	}
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			add(asString(x))
		}
	case nil:
	default:
		add(asString(v))
	}
	return out
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// compactJSON returns b without insignificant white space, or b itself when
// it is not valid JSON.
func compactJSON(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}
