package traces

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hindsight-proxy/hindsight"
)

// stepMeta is what ingest reads of a step: its identity, and what
// segmentation and its task's record need. The rest of the step is stored
// as it was delivered.
type stepMeta struct {
	Source       string
	Seq          uint64
	SessionID    string
	Server       string
	ExplicitTask string
	Transport    string
	HostPID      int
	StartedAt    time.Time
	EndedAt      time.Time
	Failed       bool // hindsight.Step.Failed
}

// rawStep is a step to ingest: its JSON encoding (of a hindsight.Step),
// stored as it is, and what ingest reads of it. The stored encoding's
// task_id and step_index are not read back: the step's key says them.
type rawStep struct {
	stepMeta
	JSON []byte

	// When the step came in a request's body, src is the body and JSON
	// is src[off:off+len(JSON)]: steps next to each other in it are
	// stored as one slice of it.
	src []byte
	off int
}

func metaOf(s *hindsight.Step) stepMeta {
	return stepMeta{
		Source: s.Source, Seq: s.Seq, SessionID: s.SessionID, Server: s.Server,
		ExplicitTask: s.ExplicitTask, Transport: s.Transport, HostPID: s.HostPID,
		StartedAt: s.StartedAt, EndedAt: s.EndedAt, Failed: s.Failed(),
	}
}

// encodeSteps encodes steps for ingest.
func encodeSteps(steps []hindsight.Step) ([]rawStep, error) {
	out := make([]rawStep, len(steps))
	for i := range steps {
		b, err := steps[i].AppendJSON(nil)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		out[i] = rawStep{stepMeta: metaOf(&steps[i]), JSON: b}
	}
	return out, nil
}

// decodeRawSteps reads steps each encoded as JSON (a hindsight.Step).
func decodeRawSteps(raws []json.RawMessage) ([]rawStep, error) {
	out := make([]rawStep, len(raws))
	for i, r := range raws {
		if m, ok := scanStep(r); ok {
			out[i] = rawStep{stepMeta: m, JSON: r}
			continue
		}
		var s hindsight.Step
		if err := hindsight.UnmarshalCompactJSON(r, &s); err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		b, err := s.AppendJSON(nil)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i, err)
		}
		out[i] = rawStep{stepMeta: metaOf(&s), JSON: b}
	}
	return out, nil
}

// decodeStepBatch decodes the body of POST /v1/steps (a StepBatch). The
// steps keep their encodings as delivered, sub-slices of body: ingest
// reads a few fields and stores the rest untouched. A body the fast scanner
// does not take (keys in another case or escaped, a key twice, escapes in
// the fields ingest reads, other top-level keys…) is decoded as
// encoding/json decodes it, with the same result, and its steps encoded
// again.
func decodeStepBatch(body []byte) ([]rawStep, error) {
	if steps, ok := scanStepBatch(body); ok {
		return steps, nil
	}
	var b struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&b); err != nil {
		return nil, badRequest("decode body: %v", err)
	}
	full := make([]hindsight.Step, len(b.Steps))
	for i, r := range b.Steps {
		if err := hindsight.UnmarshalCompactJSON(r, &full[i]); err != nil {
			return nil, badRequest("decode body: step %d: %v", i, err)
		}
	}
	steps, err := encodeSteps(full)
	if err != nil {
		return nil, badRequest("encode steps: %v", err)
	}
	return steps, nil
}

// bytesString views b as a string without copying; b must not change
// while the string is used.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// scanStepBatch is decodeStepBatch's fast path, one pass over body: it
// reports false for a body it does not take, which the general path then
// decodes (and refuses, if it is not valid).
func scanStepBatch(body []byte) ([]rawStep, bool) {
	sc := scanner{b: body}
	sc.ws()
	if !sc.byte('{') {
		return nil, false
	}
	sc.ws()
	k, plain, ok := sc.str()
	if !ok || !plain || string(k) != "steps" {
		return nil, false
	}
	sc.ws()
	if !sc.byte(':') {
		return nil, false
	}
	sc.ws()
	var steps []rawStep
	switch {
	case sc.lit("null"):
	case sc.byte('['):
		// A step is a KiB or more, most often: room for a body's steps
		// without growing, up to 64, and not much more.
		steps = make([]rawStep, 0, min(64, 1+len(body)/768))
		sc.ws()
		if !sc.byte(']') {
			for {
				start := sc.i
				m, ok := sc.step()
				if !ok {
					return nil, false
				}
				steps = append(steps, rawStep{stepMeta: m, JSON: body[start:sc.i:sc.i], src: body, off: start})
				sc.ws()
				if sc.byte(']') {
					break
				}
				if !sc.byte(',') {
					return nil, false
				}
				sc.ws()
			}
		}
	default:
		return nil, false
	}
	sc.ws()
	if !sc.byte('}') {
		return nil, false
	}
	sc.ws()
	return steps, sc.i == len(sc.b)
}

// scanStep is scanStepBatch for one step's JSON.
func scanStep(raw []byte) (stepMeta, bool) {
	sc := scanner{b: raw}
	sc.ws()
	m, ok := sc.step()
	sc.ws()
	return m, ok && sc.i == len(sc.b)
}

// scanner reads JSON as strictly as encoding/json (whose grammar it
// follows) or more: what it takes, encoding/json takes too.
type scanner struct {
	b     []byte
	i     int
	depth int      // the nesting it follows; 0: maxDepth
	names []string // the "derived" member fill read
}

// maxDepth bounds the nesting the scanner follows by default (encoding/json
// follows 10000); deeper input goes to the general path.
const maxDepth = 512

func (sc *scanner) ws() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// byte consumes c if it comes next.
func (sc *scanner) byte(c byte) bool {
	if sc.i < len(sc.b) && sc.b[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// lit consumes the literal s if it comes next.
func (sc *scanner) lit(s string) bool {
	if len(sc.b)-sc.i >= len(s) && string(sc.b[sc.i:sc.i+len(s)]) == s {
		sc.i += len(s)
		return true
	}
	return false
}

func (sc *scanner) peek() byte {
	if sc.i < len(sc.b) {
		return sc.b[sc.i]
	}
	return 0
}

// str consumes a string and returns what is between its quotes; plain
// says it has no escapes.
func (sc *scanner) str() (s []byte, plain, ok bool) {
	if !sc.byte('"') {
		return nil, false, false
	}
	start := sc.i
	plain = true
	b := sc.b
	quote := -1 // the next quote at or after i, once looked for
	for i := sc.i; i < len(b); {
		// Eight bytes at a time while none is a quote, a backslash or a
		// control character; past sixteen, a run (see plainRun). Then on
		// to the first that is.
		if i+8 <= len(b) {
			m := special8(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				if i+8 <= len(b) && special8(binary.LittleEndian.Uint64(b[i:])) == 0 {
					i, quote = plainRun(b, i+8, quote)
				}
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		switch c := b[i]; {
		case c == '"':
			sc.i = i + 1
			return b[start:i], plain, true
		case c == '\\':
			plain = false
			if i+1 >= len(b) {
				return nil, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return nil, false, false
				}
				i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			i++
		}
	}
	return nil, false, false
}

// plainRun returns the index of the first quote, backslash or control
// character in b at or after i (len(b) if none), and the index of the
// first quote at or after it (-1 if none). quote is that of an earlier
// call for the same string, or -1: a string with many escapes is searched
// for its closing quote once, not once per escape.
func plainRun(b []byte, i, quote int) (end, nextQuote int) {
	if quote < i {
		if quote = bytes.IndexByte(b[i:], '"'); quote < 0 {
			return len(b), -1
		}
		quote += i
	}
	end = quote
	if n := bytes.IndexByte(b[i:quote], '\\'); n >= 0 {
		end = i + n
	}
	if n := control(b[i:end]); n >= 0 {
		end = i + n
	}
	return end, quote
}

// control returns the index of the first byte of b below 0x20, or -1.
func control(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	// A byte of v is below 0x20 when v-0x20 borrows into its high bit
	// while the byte's own high bit is clear; a borrow from a lower byte
	// can only flag more bytes when one already is.
	for ; i+16 <= len(b); i += 16 {
		x, y := binary.LittleEndian.Uint64(b[i:]), binary.LittleEndian.Uint64(b[i+8:])
		if ((x-ones*0x20)&^x|(y-ones*0x20)&^y)&highs != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return i
		}
	}
	return -1
}

// special8 flags the bytes of x (little-endian) that are a quote, a
// backslash or below 0x20 (bytes of 0x80 and above are none of these):
// the high bit of the lowest such byte is the lowest bit set, and none is
// set when there is none. A byte of v is below n when v-n borrows into
// its high bit while the byte's own high bit is clear (a borrow goes on
// only from a byte that is below n, so bytes above it may be flagged
// wrongly, never bytes below); a byte equals c when v^c is below 1.
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, s := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x | (q-ones)&^q | (s-ones)&^s) & highs
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number consumes a number and returns it.
func (sc *scanner) number() ([]byte, bool) {
	b, start := sc.b, sc.i
	i := sc.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	sc.i = i
	return b[start:i], true
}

// skip consumes any value.
func (sc *scanner) skip(depth int) bool {
	switch c := sc.peek(); {
	case c == '"':
		_, _, ok := sc.str()
		return ok
	case c == '{', c == '[':
		if depth >= maxDepth && depth >= sc.depth {
			return false
		}
		sc.i++
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		sc.ws()
		if sc.byte(end) {
			return true
		}
		for {
			if c == '{' {
				if _, _, ok := sc.str(); !ok {
					return false
				}
				sc.ws()
				if !sc.byte(':') {
					return false
				}
				sc.ws()
			}
			if !sc.skip(depth + 1) {
				return false
			}
			sc.ws()
			if sc.byte(end) {
				return true
			}
			if !sc.byte(',') {
				return false
			}
			sc.ws()
		}
	case c == 't':
		return sc.lit("true")
	case c == 'f':
		return sc.lit("false")
	case c == 'n':
		return sc.lit("null")
	}
	_, ok := sc.number()
	return ok
}

// value consumes any value and returns it.
func (sc *scanner) value() ([]byte, bool) {
	start := sc.i
	ok := sc.skip(1)
	return sc.b[start:sc.i], ok
}

// plainString consumes a string that needs no unescaping and is valid
// UTF-8, or null ("").
func (sc *scanner) plainString() (string, bool) {
	if sc.lit("null") {
		return "", true
	}
	s, plain, ok := sc.str()
	return bytesString(s), ok && plain && utf8.Valid(s)
}

// anyString consumes a string or null.
func (sc *scanner) anyString() bool {
	if sc.lit("null") {
		return true
	}
	_, _, ok := sc.str()
	return ok
}

// time consumes a time as time.Time's UnmarshalJSON reads it.
func (sc *scanner) time() (time.Time, bool) {
	var t time.Time
	if sc.lit("null") {
		return t, true
	}
	start := sc.i
	if _, _, ok := sc.str(); !ok {
		return t, false
	}
	return t, t.UnmarshalJSON(sc.b[start:sc.i]) == nil
}

// int consumes an integer that fits an int, or null (0).
func (sc *scanner) int() (int, bool) {
	if sc.lit("null") {
		return 0, true
	}
	n, ok := sc.number()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(bytesString(n), 10, 64)
	return int(v), err == nil && v == int64(int(v))
}

// step consumes a step's JSON object and returns what ingest needs of
// it, checking that every other field has the type a Step gives it, so
// that the stored encoding decodes later. It reports false for what it
// does not take: an unknown, escaped or repeated key, a value of another
// type, an escaped or invalid UTF-8 string in a field it reads.
func (sc *scanner) step() (m stepMeta, ok bool) {
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
					m.Seq, err = strconv.ParseUint(bytesString(n), 10, 64)
					ok = err == nil
				}
			}
		case kLatencyMS:
			if !sc.lit("null") {
				var n []byte
				if n, ok = sc.number(); ok {
					_, err := strconv.ParseFloat(bytesString(n), 64)
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

// The keys of a Step's JSON, as bits of a set.
const (
	kTaskID = iota
	kSessionID
	kServer
	kStepIndex
	kStartedAt
	kEndedAt
	kLatencyMS
	kDirection
	kMethod
	kTool
	kArguments
	kResult
	kIsError
	kError
	kErrorCode
	kCausalTag
	kRedactions
	kInjected
	kNotifications
	kTruncated
	kLocal
	kClientName
	kClientVersion
	kProtocolVersion
	kRequest
	kResponse
	kExplicitTask
	kHostPID
	kTransport
	kSource
	kSeq
	kDerived       // a compact encoding's list of the bodies it left out
	kErrorTemplate // filled by the daemon when a step is read; kept on import
	kNamespace
)

// stepKeys are the keys of a Step's JSON, quoted, in the order of the
// constants above, which is the order Step.AppendJSON writes them in.
var stepKeys = [...]string{
	`"task_id"`, `"session_id"`, `"server"`, `"step_index"`, `"started_at"`, `"ended_at"`,
	`"latency_ms"`, `"direction"`, `"method"`, `"tool"`, `"arguments"`, `"result"`,
	`"is_error"`, `"error"`, `"error_code"`, `"causal_tag"`, `"redactions"`, `"injected"`,
	`"notifications"`, `"truncated"`, `"local"`, `"client_name"`, `"client_version"`,
	`"protocol_version"`, `"request"`, `"response"`, `"explicit_task"`, `"host_pid"`,
	`"transport"`, `"source"`, `"seq"`, `"derived"`, `"error_template"`, `"namespace"`,
}

// key consumes a key of a step's object and returns which it is. It first
// tries next, the key that follows the previous one in the order a
// sidecar writes them: a key with neither escapes nor control characters
// that is followed by its closing quote is that key, as str would read it.
// It reports false for a key that is not a Step's or has escapes.
func (sc *scanner) key(next int) (int, bool) {
	if next < len(stepKeys) {
		if k := stepKeys[next]; len(sc.b)-sc.i >= len(k) && string(sc.b[sc.i:sc.i+len(k)]) == k {
			sc.i += len(k)
			return next, true
		}
	}
	k, plain, ok := sc.str()
	if !ok || !plain {
		return 0, false
	}
	f := stepKey(bytesString(k))
	return f, f >= 0
}

func stepKey(name string) int {
	switch name {
	case "task_id":
		return kTaskID
	case "session_id":
		return kSessionID
	case "server":
		return kServer
	case "step_index":
		return kStepIndex
	case "started_at":
		return kStartedAt
	case "ended_at":
		return kEndedAt
	case "latency_ms":
		return kLatencyMS
	case "direction":
		return kDirection
	case "method":
		return kMethod
	case "tool":
		return kTool
	case "arguments":
		return kArguments
	case "result":
		return kResult
	case "is_error":
		return kIsError
	case "error":
		return kError
	case "error_code":
		return kErrorCode
	case "causal_tag":
		return kCausalTag
	case "redactions":
		return kRedactions
	case "injected":
		return kInjected
	case "notifications":
		return kNotifications
	case "truncated":
		return kTruncated
	case "local":
		return kLocal
	case "client_name":
		return kClientName
	case "client_version":
		return kClientVersion
	case "protocol_version":
		return kProtocolVersion
	case "request":
		return kRequest
	case "response":
		return kResponse
	case "explicit_task":
		return kExplicitTask
	case "host_pid":
		return kHostPID
	case "transport":
		return kTransport
	case "source":
		return kSource
	case "seq":
		return kSeq
	case "derived":
		return kDerived
	case "error_template":
		return kErrorTemplate
	case "namespace":
		return kNamespace
	}
	return -1
}

// derived consumes a compact encoding's "derived" member: the bodies it
// left out (see hindsight.Step.AppendCompactJSON), returned when keep is
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
		case hindsight.DerivedArguments, hindsight.DerivedResult:
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
