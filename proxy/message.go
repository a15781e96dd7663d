package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unsafe"

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
	ID     json.RawMessage // the id exactly as sent; nil for notifications
	Method string
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
func Parse(raw []byte) (Message, error) {
	raw = bytes.TrimRight(raw, "\r\n \t")
	m := Message{Raw: raw}
	if !validJSON(raw) {
		return m, ErrParse
	}
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 {
		return m, ErrParse
	}
	switch trimmed[0] {
	case '[':
		m.Kind = KindBatch
		return m, nil
	case '{':
	default:
		return m, ErrInvalid
	}
	// One pass over the top-level members; values are skipped, not decoded.
	var id, method, result, rpcErr, version gjson.Result
	gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw))).ForEach(func(key, value gjson.Result) bool {
		var dst *gjson.Result
		switch key.Str {
		case "id":
			dst = &id
		case "method":
			dst = &method
		case "result":
			dst = &result
		case "error":
			dst = &rpcErr
		case "jsonrpc":
			dst = &version
		default:
			return true
		}
		if !dst.Exists() { // the first of duplicate members wins
			*dst = value
		}
		return true
	})
	if id.Exists() {
		switch id.Type {
		case gjson.String, gjson.Number, gjson.Null:
			// Copy: the id outlives nothing else of raw, and raw stays ours.
			m.ID = json.RawMessage(id.Raw)
		default:
			return m, ErrInvalid
		}
	}
	if version.Type != gjson.String || version.Str != "2.0" {
		return m, ErrInvalid
	}
	switch {
	case method.Exists():
		if method.Type != gjson.String {
			return m, ErrInvalid
		}
		m.Method = strings.Clone(method.Str)
		if id.Exists() {
			m.Kind = KindRequest
		} else {
			m.Kind = KindNotification
		}
	case id.Exists() && (result.Exists() || rpcErr.Exists()):
		m.Kind = KindResponse
	default:
		return m, ErrInvalid
	}
	return m, nil
}

// maxFastNesting bounds the brackets in a message validated by gjson,
// whose validator recurses once per level: a line of millions of "[" must
// not overflow the stack. encoding/json validates iteratively and rejects
// nesting deeper than 10000.
const maxFastNesting = 10000

// validJSON reports whether raw is one JSON value. gjson's validator agrees
// with encoding/json's (FuzzFraming checks it) and is about three times
// faster; it is used when raw cannot nest deeply.
func validJSON(raw []byte) bool {
	if bytes.Count(raw, []byte{'{'})+bytes.Count(raw, []byte{'['}) < maxFastNesting {
		return gjson.ValidBytes(raw)
	}
	return json.Valid(raw)
}

// JSON-RPC error codes used by the proxy.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeInternalError  = -32603
	// CodeServerUnavailable answers requests the upstream server can no
	// longer answer: the child exited, or the HTTP upstream failed.
	CodeServerUnavailable = -32000
)

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
