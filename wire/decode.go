package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
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

// field consumes the value of key f into s.
func (sc *scanner) field(f int, s *hindsight.Step) (ok bool) {
	var str string
	switch f {
	case kTaskID, kSessionID, kServer, kDirection, kMethod, kTool, kErrorCode, kCausalTag,
		kClientName, kClientVersion, kProtocolVersion, kExplicitTask, kTransport, kSource, kErrorTemplate, kNamespace:
		if str, ok = sc.stringValue(); !ok {
			return false
		}
		switch f {
		case kTaskID:
			s.TaskID = str
		case kSessionID:
			s.SessionID = str
		case kServer:
			s.Server = str
		case kDirection:
			s.Direction = hindsight.Direction(str)
		case kMethod:
			s.Method = str
		case kTool:
			s.Tool = str
		case kErrorCode:
			s.ErrorCode = str
		case kCausalTag:
			s.CausalTag = hindsight.CausalTag(str)
		case kClientName:
			s.ClientName = str
		case kClientVersion:
			s.ClientVersion = str
		case kProtocolVersion:
			s.ProtocolVersion = str
		case kExplicitTask:
			s.ExplicitTask = str
		case kTransport:
			s.Transport = str
		case kSource:
			s.Source = str
		case kErrorTemplate:
			s.ErrorTemplate = str
		case kNamespace:
			s.Namespace = str
		}
		return true
	case kStartedAt:
		s.StartedAt, ok = sc.time()
	case kEndedAt:
		s.EndedAt, ok = sc.time()
	case kStepIndex:
		s.StepIndex, ok = sc.int()
	case kRedactions:
		s.Redactions, ok = sc.int()
	case kNotifications:
		s.Notifications, ok = sc.int()
	case kHostPID:
		s.HostPID, ok = sc.int()
	case kSeq, kLatencyMS:
		if sc.lit("null") {
			return true
		}
		n, ok := sc.number()
		if !ok {
			return false
		}
		var err error
		if f == kSeq {
			s.Seq, err = strconv.ParseUint(StringView(n), 10, 64)
		} else {
			s.LatencyMS, err = strconv.ParseFloat(StringView(n), 64)
		}
		return err == nil
	case kIsError, kLocal:
		var b bool
		switch {
		case sc.lit("true"):
			b = true
		case sc.lit("false"), sc.lit("null"):
		default:
			return false
		}
		if f == kIsError {
			s.IsError = b
		} else {
			s.Local = b
		}
		return true
	case kError, kInjected, kTruncated:
		if sc.lit("null") {
			return true
		}
		v, ok := sc.value()
		if !ok {
			return false
		}
		switch f {
		case kError:
			return json.Unmarshal(v, &s.Error) == nil
		case kInjected:
			return json.Unmarshal(v, &s.Injected) == nil
		}
		return json.Unmarshal(v, &s.Truncated) == nil
	case kDerived:
		sc.names, ok = sc.derived(true)
		return ok
	case kArguments, kResult, kRequest, kResponse:
		v, ok := sc.value()
		if !ok {
			return false
		}
		raw := json.RawMessage(v[:len(v):len(v)])
		switch f {
		case kArguments:
			s.Arguments = raw
		case kResult:
			s.Result = raw
		case kRequest:
			s.Request = raw
		default:
			s.Response = raw
		}
		return true
	}
	return ok
}
