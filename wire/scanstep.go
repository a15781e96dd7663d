package wire

import (
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
	var fl failure
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
		if !sc.stepField(f, &m, &fl) {
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
	m.Failed = fl.failed()
	return m, true
}

// failure is what the ingest scanner keeps of a step for Step.Failed.
type failure struct {
	tag      hindsight.CausalTag
	isError  bool
	rpcError bool // an error member that is not null
}

// failed is Step.Failed of a step with fl's members.
func (fl *failure) failed() bool {
	s := hindsight.Step{CausalTag: fl.tag, IsError: fl.isError}
	if fl.rpcError {
		s.Error = &hindsight.RPCError{}
	}
	return s.Failed()
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
