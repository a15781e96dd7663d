package wire

import (
	"encoding/json"
	"strconv"

	"github.com/hindsight-proxy/hindsight"
)

// step consumes a step's JSON object and returns what ingest needs of
// it, checking that every other field has the type a Step gives it, so
// that the stored encoding decodes later. It reports false for what it
// does not take: an unknown, escaped or repeated key, a value of another
// type, an escaped or invalid UTF-8 string in a field it reads.
func (sc *scanner) step() (m Meta, ok bool) {
	if !sc.byte('{') {
		return m, false
	}
	var seen uint64
	var isError, rpcError bool
	var tag string
	sc.ws()
	if sc.byte('}') {
		return m, true
	}
	next := 0 // the key a sidecar writes next (see key)
	for {
		f, ok := sc.key(next)
		if !ok || seen&(1<<f) != 0 {
			return m, false
		}
		seen |= 1 << f
		next = f + 1
		sc.ws()
		if !sc.byte(':') {
			return m, false
		}
		sc.ws()
		switch f {
		case kSessionID:
			m.SessionID, ok = sc.plainString()
		case kServer:
			m.Server, ok = sc.plainString()
		case kExplicitTask:
			m.ExplicitTask, ok = sc.plainString()
		case kTransport:
			m.Transport, ok = sc.plainString()
		case kSource:
			m.Source, ok = sc.plainString()
		case kCausalTag:
			tag, ok = sc.plainString()
		case kTaskID, kDirection, kMethod, kTool, kErrorCode, kClientName, kClientVersion, kProtocolVersion, kErrorTemplate, kNamespace:
			ok = sc.anyString()
		case kStartedAt:
			m.StartedAt, ok = sc.time()
		case kEndedAt:
			m.EndedAt, ok = sc.time()
		case kStepIndex, kRedactions, kNotifications:
			_, ok = sc.int()
		case kHostPID:
			m.HostPID, ok = sc.int()
		case kSeq:
			if !sc.lit("null") {
				var n []byte
				if n, ok = sc.number(); ok {
					var err error
					m.Seq, err = strconv.ParseUint(StringView(n), 10, 64)
					ok = err == nil
				}
			}
		case kLatencyMS:
			if !sc.lit("null") {
				var n []byte
				if n, ok = sc.number(); ok {
					_, err := strconv.ParseFloat(StringView(n), 64)
					ok = err == nil
				}
			}
		case kIsError, kLocal:
			switch {
			case sc.lit("true"):
				isError = isError || f == kIsError
			case sc.lit("false"), sc.lit("null"):
			default:
				ok = false
			}
		case kDerived:
			_, ok = sc.derived(false)
		case kError, kInjected, kTruncated:
			if !sc.lit("null") {
				var v []byte
				if v, ok = sc.value(); ok {
					switch f {
					case kError:
						var e hindsight.RPCError
						ok, rpcError = json.Unmarshal(v, &e) == nil, true
					case kInjected:
						var in []hindsight.Injection
						ok = json.Unmarshal(v, &in) == nil
					default:
						var tr []hindsight.Truncation
						ok = json.Unmarshal(v, &tr) == nil
					}
				}
			}
		default: // the bodies: any JSON value
			ok = sc.skip(1)
		}
		if !ok {
			return m, false
		}
		sc.ws()
		if sc.byte('}') {
			break
		}
		if !sc.byte(',') {
			return m, false
		}
		sc.ws()
	}
	s := hindsight.Step{CausalTag: hindsight.CausalTag(tag), IsError: isError}
	if rpcError {
		s.Error = &hindsight.RPCError{}
	}
	m.Failed = s.Failed()
	return m, true
}

// derived consumes a compact encoding's "derived" member: the bodies it
// left out (see AppendCompactStep), returned when keep is
// set. Anything but a list of known body names is refused.
func (sc *scanner) derived(keep bool) (names []string, ok bool) {
	if !sc.byte('[') {
		return nil, false
	}
	sc.ws()
	if sc.byte(']') {
		return nil, true
	}
	for {
		v, plain, ok := sc.str()
		if !ok || !plain {
			return nil, false
		}
		switch string(v) {
		case DerivedArguments, DerivedResult:
			if keep {
				names = append(names, string(v))
			}
		default:
			return nil, false
		}
		sc.ws()
		if sc.byte(']') {
			return names, true
		}
		if !sc.byte(',') {
			return nil, false
		}
		sc.ws()
	}
}
