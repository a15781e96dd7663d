package capture

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"
	"github.com/tidwall/gjson"
)

// reqFields are what a step takes from its redacted request: the
// arguments (params.arguments of a tools/call, params otherwise), the tool
// (params.name of a tools/call) and the task named in params._meta. Of
// duplicate members the first counts, as with a path search.
type reqFields struct {
	args json.RawMessage // a slice of the request
	tool string
	task string // "" when _meta names none
}

// respFields are what a step takes from its redacted response: the result
// (a slice of the response), result.isError and the error.
type respFields struct {
	result  json.RawMessage
	isError bool
	err     *hindsight.RPCError
}

// readRequest reads the fields of req: in one pass over its members when
// it is plain (an object whose keys hold no escapes, valid as far as it is
// read), with gjson otherwise. FuzzReadFields holds the two to each other.
func readRequest(req []byte, method string) reqFields {
	if f, ok := readRequestFast(req, method); ok {
		return f
	}
	return readRequestGJSON(req, method)
}

// readResponse reads the fields of resp, as readRequest does.
func readResponse(resp []byte) respFields {
	if f, ok := readResponseFast(resp); ok {
		return f
	}
	return readResponseGJSON(resp)
}

// readRequestGJSON is readRequest with gjson, which reads the body in
// place (GetBytes would copy every result it returns): one pass over
// params' members instead of a search per path.
func readRequestGJSON(req []byte, method string) reqFields {
	var f reqFields
	params := gjson.Get(wire.StringView(req), "params")
	var seen [3]bool
	if method != "tools/call" && params.Exists() {
		f.args = rawIn(req, params)
	}
	params.ForEach(func(k, v gjson.Result) bool {
		i := slices.Index([]string{"name", "arguments", "_meta"}, k.Str)
		if i < 0 || seen[i] {
			return true
		}
		seen[i] = true
		switch {
		case i == 0 && method == "tools/call":
			f.tool = strings.Clone(v.String())
		case i == 1 && method == "tools/call":
			f.args = rawIn(req, v)
		case i == 2:
			f.task = metaTask(v)
		}
		return true
	})
	return f
}

// readResponseGJSON is readResponse with gjson.
func readResponseGJSON(resp []byte) respFields {
	var f respFields
	var res [2]gjson.Result // result, error: one pass over the members
	gjson.Parse(wire.StringView(resp)).ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "result" && !res[0].Exists():
			res[0] = v
		case k.Str == "error" && !res[1].Exists():
			res[1] = v
		}
		return true
	})
	if res[0].Exists() {
		f.result = rawIn(resp, res[0])
		f.isError = res[0].Get("isError").Bool()
	}
	if e := res[1]; e.IsObject() {
		f.err = rpcError(e)
	}
	return f
}

// metaTask is the task a request's _meta names, "" for none.
func metaTask(meta gjson.Result) string {
	if t := meta.Get(taskMetaKeyPath); t.Type == gjson.String && t.Str != "" {
		return strings.Clone(t.Str)
	}
	return ""
}

// rpcError is the error of a response, e an object; its data is a slice
// of the response.
func rpcError(e gjson.Result) *hindsight.RPCError {
	err := &hindsight.RPCError{Code: int(e.Get("code").Int()), Message: strings.Clone(e.Get("message").String())}
	if d := e.Get("data"); d.Exists() {
		err.Data = json.RawMessage(d.Raw)
	}
	return err
}

// readRequestFast is readRequest's pass over the members; false when req
// is not plain.
func readRequestFast(req []byte, method string) (reqFields, bool) {
	var f reqFields
	var params []byte
	if !eachMember(req, func(k, v []byte) bool {
		if string(k) == "params" {
			params = v
			return false
		}
		return true
	}) {
		return f, false
	}
	call := method == "tools/call"
	if !call && params != nil {
		f.args = params
	}
	if len(params) == 0 || params[0] != '{' {
		return f, true // no params, or none with members
	}
	var seen [3]bool
	ok := eachMember(params, func(k, v []byte) bool {
		switch {
		case string(k) == "name" && !seen[0]:
			seen[0] = true
			if call {
				f.tool = stringValue(v)
			}
		case string(k) == "arguments" && !seen[1]:
			seen[1] = true
			if call {
				f.args = v
			}
		case string(k) == "_meta" && !seen[2]:
			seen[2] = true
			f.task = metaTask(gjson.Parse(wire.StringView(v)))
		}
		return !(seen[0] && seen[1] && seen[2])
	})
	return f, ok
}

// readResponseFast is readResponse's pass over the members; false when
// resp is not plain. A result object's members are read in the same pass,
// for isError.
func readResponseFast(resp []byte) (respFields, bool) {
	var f respFields
	var res, errv []byte
	seenIsError := false
	isError := func(k, v []byte) bool {
		if string(k) == "isError" && !seenIsError {
			seenIsError = true
			f.isError = gjson.Parse(wire.StringView(v)).Bool()
		}
		return true
	}
	skip := func(b, k []byte, v int) (int, bool) {
		if string(k) == "result" && res == nil && v < len(b) && b[v] == '{' {
			end, _, ok := members(b, v, skipValue, isError)
			return end, ok
		}
		return wire.SkipValue(b, v, 1)
	}
	end, stopped, ok := members(resp, wire.SkipSpace(resp, 0), skip, func(k, v []byte) bool {
		switch {
		case string(k) == "result" && res == nil:
			res = v
		case string(k) == "error" && errv == nil:
			errv = v
		}
		return res == nil || errv == nil
	})
	if !ok || !stopped && wire.SkipSpace(resp, end) != len(resp) {
		return f, false
	}
	f.result = res
	if len(errv) > 0 && errv[0] == '{' {
		f.err = rpcError(gjson.Parse(wire.StringView(errv)))
	}
	return f, true
}

// stringValue is the text of a JSON value as gjson's String gives it: a
// string unquoted (a copy), other values by gjson.
func stringValue(v []byte) string {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v[1:len(v)-1], '\\') < 0 {
		return string(v[1 : len(v)-1])
	}
	return strings.Clone(gjson.Parse(wire.StringView(v)).String())
}
