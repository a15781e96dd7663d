package proxy

import (
	"encoding/json"

	"github.com/hindsight-proxy/hindsight/wire"
)

// tooDeepID reports whether raw is a JSON object that would be valid but
// for nesting deeper than wire.MaxNesting, and returns its top-level id
// when that is a string or a number (nil otherwise). Such a message cannot
// be relayed (the agent's peer and every reader of steps stop at that
// depth), but its sender waits for an answer to that id.
func tooDeepID(raw []byte) (id json.RawMessage, deep bool) {
	i := wire.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = wire.SkipSpace(raw, i+1)
	for i < len(raw) && raw[i] != '}' {
		kEnd, _, ok := wire.SkipString(raw, i)
		if !ok {
			return nil, false
		}
		key := string(raw[i+1 : kEnd-1])
		i = wire.SkipSpace(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		vStart := wire.SkipSpace(raw, i+1)
		vEnd, tooDeep, ok := skipDeep(raw, vStart)
		if !ok {
			return nil, false
		}
		deep = deep || tooDeep
		if key == "id" && vStart < len(raw) && (raw[vStart] == '"' || raw[vStart] == '-' || raw[vStart] >= '0' && raw[vStart] <= '9') {
			id = raw[vStart:vEnd:vEnd]
		}
		i = wire.SkipSpace(raw, vEnd)
		if i < len(raw) && raw[i] == ',' {
			i = wire.SkipSpace(raw, i+1)
		}
	}
	if i >= len(raw) || wire.SkipSpace(raw, i+1) != len(raw) || !deep {
		return nil, false
	}
	return id, true
}

// skipDeep skips the value at raw[i] however deep it nests: containers are
// followed with a stack of their brackets, everything else validated by
// wire.SkipValue. It reports whether the value nests deeper than
// wire.MaxNesting, and false for what is not valid JSON at any depth.
func skipDeep(raw []byte, i int) (end int, tooDeep, ok bool) {
	if i >= len(raw) || (raw[i] != '{' && raw[i] != '[') {
		end, ok = wire.SkipValue(raw, i, 0)
		return end, false, ok
	}
	var stack []byte
	for {
		i = wire.SkipSpace(raw, i)
		if i >= len(raw) {
			return i, false, false
		}
		switch c := raw[i]; {
		case c == '{' || c == '[':
			stack = append(stack, c)
			tooDeep = tooDeep || len(stack) > wire.MaxNesting
			i = wire.SkipSpace(raw, i+1)
			if i < len(raw) && raw[i] == c+2 { // empty
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i, ok = objectKey(raw, i); !ok {
					return i, false, false
				}
			}
			continue
		default:
			if i, ok = wire.SkipValue(raw, i, wire.MaxNesting); !ok {
				return i, false, false
			}
		}
		// After a value: a comma and the next one, or the container's end.
		for {
			if len(stack) == 0 {
				return i, tooDeep, true
			}
			i = wire.SkipSpace(raw, i)
			if i >= len(raw) {
				return i, false, false
			}
			top := stack[len(stack)-1]
			if raw[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if raw[i] != ',' {
				return i, false, false
			}
			i = wire.SkipSpace(raw, i+1)
			if top == '{' {
				if i, ok = objectKey(raw, i); !ok {
					return i, false, false
				}
			}
			break
		}
	}
}

// objectKey skips a member's key and its colon at raw[i].
func objectKey(raw []byte, i int) (int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return i, false
	}
	end, _, ok := wire.SkipString(raw, i)
	if !ok {
		return end, false
	}
	i = wire.SkipSpace(raw, end)
	if i >= len(raw) || raw[i] != ':' {
		return i, false
	}
	return wire.SkipSpace(raw, i+1), true
}
