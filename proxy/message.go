package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/hindsight-proxy/hindsight/wire"
	"github.com/tidwall/gjson"
)

// Kind classifies a JSON-RPC message.
type Kind uint8

// Message kinds.
const (
	KindInvalid      Kind = iota // not a JSON-RPC 2.0 message
	KindRequest                  // has method and id
	KindNotification             // has method, no id
	KindResponse                 // has id and result or error, no method
	KindBatch                    // a JSON array (batches predate 2025-06-18; relayed unchanged)
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	case KindBatch:
		return "batch"
	}
	return "invalid"
}

// Message is one JSON-RPC message as relayed. Raw holds the exact bytes
// received, without the line terminator; the proxy never re-encodes a
// message it does not change.
type Message struct {
	Raw    []byte
	Kind   Kind
	ID     json.RawMessage // the id exactly as sent, within Raw; nil for notifications
	Method string

	params, result, rpcErr span // the members' values in Raw
	// name and meta are the values of params' own "name" and "_meta"
	// members, found while params is validated, so that a tools/call's
	// tool name and a progress token need no second scan.
	name, meta span
	// hasID and hasMethod say whether the message has those members at
	// all, valid or not: an invalid message with an id it cannot use, or
	// with neither, is still answered (with a null id); one with a method
	// and no id is a notification, never answered.
	hasID, hasMethod bool
}

// IDKey returns a map key for the message's id that treats equal ids alike
// (1 and 1.0 are different ids on the wire and stay different).
func (m *Message) IDKey() string { return string(m.ID) }

// ErrParse reports bytes that are not valid JSON.
var ErrParse = errors.New("parse error: invalid JSON")

// ErrInvalid reports valid JSON that is not a JSON-RPC 2.0 message.
var ErrInvalid = errors.New("invalid request: not a JSON-RPC 2.0 message")

// Parse classifies raw without copying it. It returns ErrParse for bytes that
// are not JSON and ErrInvalid for JSON that is not a JSON-RPC message; in
// the latter case the returned Message still carries any id it found, so
// the caller can answer it.
//
// The returned ID is a sub-slice of raw (with its capacity capped, so
// appending to it never writes into raw): raw must not be modified while
// the Message is in use. Parse validates raw fully and allocates nothing
// for the messages MCP sends most.
func Parse(raw []byte) (Message, error) {
	raw = bytes.TrimRight(raw, "\r\n \t")
	m := Message{Raw: raw}
	i := wire.SkipSpace(raw, 0)
	if i == len(raw) {
		return m, ErrParse
	}
	if raw[i] != '{' {
		end, ok := wire.SkipValue(raw, i, 0)
		if !ok || wire.SkipSpace(raw, end) != len(raw) {
			return m, ErrParse
		}
		if raw[i] == '[' {
			m.Kind = KindBatch
			return m, nil
		}
		return m, ErrInvalid
	}
	// One pass over the top-level members, validating as it goes; values
	// are skipped, not decoded.
	var id, method, version span
	i = wire.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		i++
	} else {
		for {
			if i >= len(raw) || raw[i] != '"' {
				return m, ErrParse
			}
			kEnd, kEsc, ok := wire.SkipString(raw, i)
			if !ok {
				return m, ErrParse
			}
			key := raw[i+1 : kEnd-1]
			i = wire.SkipSpace(raw, kEnd)
			if i >= len(raw) || raw[i] != ':' {
				return m, ErrParse
			}
			vStart := wire.SkipSpace(raw, i+1)
			if kEsc {
				key = unescapeKey(key)
			}
			var vEnd int
			if string(key) == "params" && !m.params.ok() && vStart < len(raw) && raw[vStart] == '{' {
				vEnd, ok = m.skipParams(raw, vStart)
			} else {
				vEnd, ok = wire.SkipValue(raw, vStart, 1)
			}
			if !ok {
				return m, ErrParse
			}
			var dst *span
			switch string(key) {
			case "id":
				dst = &id
			case "method":
				dst = &method
			case "params":
				dst = &m.params
			case "result":
				dst = &m.result
			case "error":
				dst = &m.rpcErr
			case "jsonrpc":
				dst = &version
			}
			if dst != nil && !dst.ok() { // the first of duplicate members wins
				*dst = span{vStart, vEnd}
			}
			i = wire.SkipSpace(raw, vEnd)
			if i < len(raw) && raw[i] == ',' {
				i = wire.SkipSpace(raw, i+1)
				continue
			}
			if i < len(raw) && raw[i] == '}' {
				i++
				break
			}
			return m, ErrParse
		}
	}
	if wire.SkipSpace(raw, i) != len(raw) {
		return m, ErrParse
	}
	m.hasID, m.hasMethod = id.ok(), method.ok()
	if id.ok() {
		switch raw[id.start] {
		case '{', '[', 't', 'f':
			return m, ErrInvalid
		}
		m.ID = json.RawMessage(raw[id.start:id.end:id.end])
	}
	if !version.ok() || !stringIs(raw, version, "2.0") {
		return m, ErrInvalid
	}
	switch {
	case method.ok():
		if raw[method.start] != '"' {
			return m, ErrInvalid
		}
		m.Method = methodName(raw[method.start:method.end])
		if id.ok() {
			m.Kind = KindRequest
		} else {
			m.Kind = KindNotification
		}
	case id.ok() && (m.result.ok() || m.rpcErr.ok()):
		m.Kind = KindResponse
	default:
		return m, ErrInvalid
	}
	return m, nil
}

// skipParams validates the params object starting at raw[i], as skipValue
// does, and notes where its "name" and "_meta" members' values are.
func (m *Message) skipParams(raw []byte, i int) (int, bool) {
	i = wire.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return i, false
		}
		kEnd, kEsc, ok := wire.SkipString(raw, i)
		if !ok {
			return i, false
		}
		key := raw[i+1 : kEnd-1]
		i = wire.SkipSpace(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return i, false
		}
		vStart := wire.SkipSpace(raw, i+1)
		vEnd, ok := wire.SkipValue(raw, vStart, 2) // inside the message and params
		if !ok {
			return vEnd, false
		}
		if kEsc {
			key = unescapeKey(key)
		}
		var dst *span
		switch string(key) {
		case "name":
			dst = &m.name
		case "_meta":
			dst = &m.meta
		}
		if dst != nil && !dst.ok() { // the first of duplicate members wins, as with gjson
			*dst = span{vStart, vEnd}
		}
		i = wire.SkipSpace(raw, vEnd)
		if i < len(raw) && raw[i] == ',' {
			i = wire.SkipSpace(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == '}' {
			return i + 1, true
		}
		return i, false
	}
}

// paramString returns the value at s in Raw as gjson's String would: a
// string's contents (aliasing Raw when it holds no escapes: Raw is never
// modified), other values as written; "" when s is absent.
func (m *Message) paramString(s span) string {
	if !s.ok() {
		return ""
	}
	v := m.Raw[s.start:s.end]
	if v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return wire.StringView(v[1 : len(v)-1])
	}
	return gjson.Parse(wire.StringView(v)).String()
}

// member returns the value at s in Raw, capped so that appending to it
// never writes into Raw; nil when s is absent.
func (m *Message) member(s span) json.RawMessage {
	if !s.ok() {
		return nil
	}
	return json.RawMessage(m.Raw[s.start:s.end:s.end])
}

// span locates a member's value in Message.Raw; the zero span is absent.
type span struct{ start, end int }

func (s span) ok() bool { return s.end > 0 }

// stringIs reports whether the JSON string at s in raw decodes to want.
func stringIs(raw []byte, s span, want string) bool {
	v := raw[s.start:s.end]
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	if string(v[1:len(v)-1]) == want {
		return true
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return false
	}
	var str string
	return json.Unmarshal(v, &str) == nil && str == want
}

// knownMethods are returned without a copy by methodName.
var knownMethods = []string{
	"tools/call", "notifications/progress", "notifications/cancelled", "ping", "tools/list",
	"initialize", "notifications/initialized", "server/discover", "resources/read", "resources/list",
	"resources/templates/list", "prompts/get", "prompts/list", "completion/complete",
	"notifications/message", "notifications/tools/list_changed", "notifications/resources/updated",
	"notifications/resources/list_changed", "notifications/prompts/list_changed",
	"sampling/createMessage", "elicitation/create", "roots/list", "logging/setLevel",
	"resources/subscribe", "resources/unsubscribe", "notifications/roots/list_changed",
}

// methodName decodes the JSON string v; common method names come from a
// table, so a Message never aliases its input through Method.
func methodName(v []byte) string {
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		for _, k := range knownMethods {
			if string(s) == k {
				return k
			}
		}
		return string(s)
	}
	var str string
	json.Unmarshal(v, &str) // v is a valid JSON string
	return str
}

// unescapeKey decodes an object key holding escapes (rare).
func unescapeKey(k []byte) []byte {
	var s string
	quoted := make([]byte, 0, len(k)+2)
	quoted = append(append(append(quoted, '"'), k...), '"')
	if json.Unmarshal(quoted, &s) != nil {
		return k
	}
	return []byte(s)
}

// JSON-RPC error codes used by the proxy.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeInternalError  = -32603
	CodeInvalidParams  = -32602
	// CodeServerUnavailable answers requests the upstream server can no
	// longer answer: the child exited, or the HTTP upstream failed.
	CodeServerUnavailable = -32000
)

// RPCError is an error a LocalHandler returns to answer with that JSON-RPC
// code and message; any other error is answered CodeInternalError.
type RPCError struct {
	Code    int
	Message string
}

func (e *RPCError) Error() string { return e.Message }

// ErrorResponse encodes a JSON-RPC error response. A nil id encodes as null.
func ErrorResponse(id json.RawMessage, code int, message string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	var b bytes.Buffer
	b.Grow(64 + len(message))
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"error":{"code":`)
	b.WriteString(strconv.Itoa(code))
	b.WriteString(`,"message":`)
	msg, _ := json.Marshal(message)
	b.Write(msg)
	b.WriteString(`}}`)
	return b.Bytes()
}

// ResultResponse encodes a JSON-RPC success response.
func ResultResponse(id json.RawMessage, result json.RawMessage) []byte {
	var b bytes.Buffer
	b.Grow(40 + len(id) + len(result))
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(id)
	b.WriteString(`,"result":`)
	b.Write(result)
	b.WriteString(`}`)
	return b.Bytes()
}
