package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unsafe"

	"github.com/hindsight-proxy/hindsight"
	"github.com/tidwall/gjson"
)

// The bodies a step's compact encoding may leave out, as named in its
// "derived" member.
const (
	DerivedArguments = "arguments"
	DerivedResult    = "result"
)

// RequestArguments returns the arguments capture records for a request:
// the params.arguments of a tools/call, the params of any other method,
// nil when there are none or request is not a JSON object. Of duplicate
// members the first counts. The result is a slice of request, not a copy
// (its capacity is capped, so appending to it never writes into request).
func RequestArguments(method string, request json.RawMessage) json.RawMessage {
	params := gjson.Get(StringView(request), "params")
	if method == "tools/call" {
		return within(request, params.Get("arguments"))
	}
	return within(request, params)
}

// ResponseResult returns the result member of a response, nil when it has
// none or is not a JSON object. Like RequestArguments, it returns a slice
// of response.
func ResponseResult(response json.RawMessage) json.RawMessage {
	return within(response, gjson.Get(StringView(response), "result"))
}

// within returns the text of r, which gjson found in body, as a slice of
// body with its capacity capped; a copy when gjson built the text itself
// (it does not for the paths above, but nothing in its API promises so).
func within(body []byte, r gjson.Result) json.RawMessage {
	if !r.Exists() || r.Raw == "" {
		return nil
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(r.Raw)))
	b := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	if n := uintptr(len(r.Raw)); p >= b && p-b <= uintptr(len(body)) && n <= uintptr(len(body))-(p-b) {
		i := int(p - b)
		return body[i : i+len(r.Raw) : i+len(r.Raw)]
	}
	return json.RawMessage(r.Raw)
}

// AppendCompactStep appends s encoded as AppendStep does, but without its
// arguments and result when they are exactly what RequestArguments and
// ResponseResult find in its request and response, which is how capture
// builds them: the bodies are then sent and stored once, not twice. A
// "derived" member, last, names what was left out; Derive puts it back.
// A step whose bodies are not derivable (cut, or built otherwise) is
// encoded whole, with no "derived" member.
//
// Arguments or a result that lies inside the request or response's memory
// is taken to be what those functions find there without parsing the body
// again: capture's BuildStep and Derive take them so, and nothing else
// makes a body a slice of another. Bodies held apart are compared.
func AppendCompactStep(b []byte, s *hindsight.Step) ([]byte, error) {
	c := *s
	var derived [2]string
	n := 0
	if len(c.Arguments) > 0 && (sliceOf(c.Arguments, c.Request) || bytes.Equal(RequestArguments(c.Method, c.Request), c.Arguments)) {
		c.Arguments = nil
		derived[n], n = DerivedArguments, n+1
	}
	if len(c.Result) > 0 && (sliceOf(c.Result, c.Response) || bytes.Equal(ResponseResult(c.Response), c.Result)) {
		c.Result = nil
		derived[n], n = DerivedResult, n+1
	}
	start := len(b)
	b, err := AppendStep(b, &c)
	if err != nil || n == 0 {
		return b, err
	}
	if len(b) == start || b[len(b)-1] != '}' {
		return b, fmt.Errorf("encode step: unexpected encoding")
	}
	b = append(b[:len(b)-1], `,"derived":[`...)
	for i, d := range derived[:n] {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, d)
	}
	return append(b, "]}"...), nil
}

// sliceOf reports whether sub lies inside body's memory.
func sliceOf(sub, body []byte) bool {
	if len(sub) == 0 || len(body) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	b := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	return p >= b && p-b <= uintptr(len(body)) && uintptr(len(sub)) <= uintptr(len(body))-(p-b)
}

// Derive puts back into s the bodies a compact encoding left out, named by
// its "derived" member.
func Derive(s *hindsight.Step, derived []string) error {
	for _, d := range derived {
		switch d {
		case DerivedArguments:
			s.Arguments = RequestArguments(s.Method, s.Request)
		case DerivedResult:
			s.Result = ResponseResult(s.Response)
		default:
			return fmt.Errorf("derive step bodies: unknown body %q", d)
		}
	}
	return nil
}

// UnmarshalCompact decodes a step encoded by AppendStep or
// AppendCompactStep into s with encoding/json, deriving what the latter
// left out.
func UnmarshalCompact(data []byte, s *hindsight.Step) error {
	var w struct {
		hindsight.Step
		Derived []string `json:"derived"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	if err := Derive(&w.Step, w.Derived); err != nil {
		return err
	}
	*s = w.Step
	return nil
}
