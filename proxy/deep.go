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
		vEnd, tooDeep, ok := wire.SkipDeep(raw, vStart, 1) // inside the message
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
