package wire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight"
)

// DecodeStep decodes a step's JSON (of a hindsight.Step) into a zero s, as
// json.Unmarshal does, in one pass for the encodings sidecars send, with
// json.Unmarshal for anything else. s shares no memory with raw.
func DecodeStep(raw []byte, s *hindsight.Step) error {
	// One copy of raw; the bodies are slices of it.
	sc := scanner{b: bytes.Clone(raw)}
	sc.ws()
	if sc.fill(s) {
		if sc.ws(); sc.i == len(sc.b) {
			return Derive(s, sc.names)
		}
	}
	*s = hindsight.Step{}
	return UnmarshalCompact(raw, s)
}

// stringValue consumes a string, or null ("").
func (sc *scanner) stringValue() (string, bool) {
	if sc.lit("null") {
		return "", true
	}
	start := sc.i
	v, plain, ok := sc.str()
	switch {
	case !ok:
		return "", false
	case plain && utf8.Valid(v):
		return string(v), true
	}
	var s string
	return s, json.Unmarshal(sc.b[start:sc.i], &s) == nil
}

// fill consumes a step's JSON object into s, reporting false for what it
// does not take (see step). Keys may come in any order.
func (sc *scanner) fill(s *hindsight.Step) bool {
	if !sc.byte('{') {
		return false
	}
	var seen uint64
	sc.ws()
	if sc.byte('}') {
		return true
	}
	for {
		k, plain, ok := sc.str()
		if !ok || !plain {
			return false
		}
		f := stepKey(StringView(k))
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		sc.ws()
		if !sc.byte(':') {
			return false
		}
		sc.ws()
		if !sc.field(f, s) {
			return false
		}
		sc.ws()
		if sc.byte('}') {
			return true
		}
		if !sc.byte(',') {
			return false
		}
		sc.ws()
	}
}
