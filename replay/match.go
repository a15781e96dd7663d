package replay

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/tidwall/gjson"
)

// Matcher picks the recorded answer of each call, in the order calls
// arrive. It is safe for concurrent use.
type Matcher struct {
	mode Match
	rec  *Recording

	mu      sync.Mutex
	used    map[*Call]bool
	usedAns map[*Answer]bool
	next    int // MatchSequential: the recorded call the next call gets
}

// NewMatcher returns a matcher over rec's calls.
func NewMatcher(rec *Recording, mode Match) *Matcher {
	if mode == "" {
		mode = MatchExact
	}
	return &Matcher{mode: mode, rec: rec, used: map[*Call]bool{}, usedAns: map[*Answer]bool{}}
}

// Call returns the recorded call that answers a call of tool with args,
// or nil and the closest recorded call (nil when nothing was recorded).
func (m *Matcher) Call(tool string, args json.RawMessage) (match, closest *Call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := gjson.ParseBytes(args)
	if m.mode == MatchSequential {
		if m.next < len(m.rec.Calls) && m.rec.Calls[m.next].Tool == tool {
			c := m.rec.Calls[m.next]
			m.next++
			return c, nil
		}
		return nil, m.closest(tool, live)
	}
	var cands []*Call
	for _, c := range m.rec.Calls {
		if c.Tool == tool && (m.mode == MatchTool || SameArguments(gjson.ParseBytes(c.Arguments), live)) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return nil, m.closest(tool, live)
	}
	for _, c := range cands {
		if !m.used[c] {
			m.used[c] = true
			return c, nil
		}
	}
	return cands[len(cands)-1], nil // used up: the last answer again
}

// closest returns the recorded call nearest to tool(live): of the same
// tool with the fewest differing values, else the first recorded call.
func (m *Matcher) closest(tool string, live gjson.Result) *Call {
	var best *Call
	bestD := -1
	for _, c := range m.rec.Calls {
		if c.Tool != tool {
			continue
		}
		if d := distance(gjson.ParseBytes(c.Arguments), live); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if best == nil && len(m.rec.Calls) > 0 {
		best = m.rec.Calls[0]
	}
	return best
}

// Answer returns the recorded answer to a request of method with params
// (matched like calls in MatchExact; a list request matches on its cursor
// alone), or nil.
func (m *Matcher) Answer(method string, params json.RawMessage) *Answer {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := gjson.ParseBytes(params)
	var cands []*Answer
	for _, a := range m.rec.Answers {
		if a.Method != method {
			continue
		}
		rec := gjson.ParseBytes(a.Params)
		if isList(method) {
			if rec.Get("cursor").String() == live.Get("cursor").String() {
				cands = append(cands, a)
			}
		} else if SameArguments(rec, live) {
			cands = append(cands, a)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	for _, a := range cands {
		if !m.usedAns[a] {
			m.usedAns[a] = true
			return a
		}
	}
	return cands[len(cands)-1]
}

func isList(method string) bool {
	switch method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
		return true
	}
	return false
}

// SameArguments reports whether live arguments match recorded ones:
// equal JSON values, numbers by value, members in any order, _meta
// members ignored, and a recorded redacted value ("[REDACTED…]") matching
// any value. Absent arguments equal an empty object.
func SameArguments(recorded, live gjson.Result) bool {
	return distance(recorded, live) == 0
}

// distance counts the values that differ between recorded and live, as
// SameArguments compares them.
func distance(recorded, live gjson.Result) int {
	if isRedacted(recorded) {
		return 0
	}
	if isEmpty(recorded) && isEmpty(live) {
		return 0
	}
	switch {
	case recorded.IsObject() && live.IsObject():
		d := 0
		rm, lm := recorded.Map(), live.Map()
		for k, v := range rm {
			if k == "_meta" {
				continue
			}
			if lv, ok := lm[k]; ok {
				d += distance(v, lv)
			} else {
				d++
			}
		}
		for k := range lm {
			if _, ok := rm[k]; !ok && k != "_meta" {
				d++
			}
		}
		return d
	case recorded.IsArray() && live.IsArray():
		ra, la := recorded.Array(), live.Array()
		d := 0
		for i := 0; i < len(ra) || i < len(la); i++ {
			if i >= len(ra) || i >= len(la) {
				d++
				continue
			}
			d += distance(ra[i], la[i])
		}
		return d
	case recorded.Type != live.Type:
		return 1
	case recorded.Type == gjson.Number:
		if recorded.Num == live.Num {
			return 0
		}
		return 1
	case recorded.Type == gjson.String:
		if recorded.Str == live.Str {
			return 0
		}
		return 1
	}
	if recorded.Raw == live.Raw || recorded.Type == gjson.True || recorded.Type == gjson.False || recorded.Type == gjson.Null {
		return 0
	}
	return 1
}

// isEmpty reports an absent value or an empty object.
func isEmpty(v gjson.Result) bool {
	if !v.Exists() || v.Type == gjson.Null {
		return true
	}
	if v.IsObject() {
		n := 0
		v.ForEach(func(k, _ gjson.Result) bool {
			if k.Str != "_meta" {
				n++
			}
			return true
		})
		return n == 0
	}
	return false
}

// Unmatched is the text of the isError result a call without a recorded
// match gets.
func Unmatched(mode Match, tool string, args json.RawMessage, closest *Call) string {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	s := fmt.Sprintf("[replay] no recorded call matches %s %s (match mode %s).", tool, compactJSON(args), mode)
	if closest == nil {
		return s + " Nothing was recorded of this server's tools."
	}
	return s + fmt.Sprintf(" Closest recorded call: step %d, %s %s.", closest.Step, closest.Tool, compactJSON(closest.Arguments))
}

func compactJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return "{}"
	}
	var buf []byte
	buf = append(buf, gjson.ParseBytes(b).Get("@ugly").Raw...)
	if len(buf) > 300 {
		return string(buf[:300]) + "…"
	}
	return string(buf)
}
