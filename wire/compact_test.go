package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// compactCases are steps as capture builds them, and some it does not.
func compactCases() map[string]struct {
	step    hindsight.Step
	derived string // the "derived" member expected, "" for none
} {
	call := fullStep()
	call.Request = json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/a\u00e9","n":[1,2]}}}`)
	call.Response = json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
	list := hindsight.Step{Method: "tools/list", Source: "s", Seq: 2,
		Request:   json.RawMessage(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"c"}}`),
		Arguments: json.RawMessage(`{"cursor":"c"}`),
		Response:  json.RawMessage(`{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"x"}}`)}
	cut := call
	cut.Request = json.RawMessage(`"{\"jsonrpc\":\"2.0\",…"`) // a request too large, kept as a preview
	other := call
	other.Result = json.RawMessage(`{"content":[1]}`) // not the response's
	dup := call
	dup.Request = json.RawMessage(`{"params":{"arguments":{"a":1},"arguments":{"path":"/tmp/a\u00e9","n":[1,2]}}}`)
	return map[string]struct {
		step    hindsight.Step
		derived string
	}{
		"tools/call":         {call, `"derived":["arguments","result"]`},
		"params":             {list, `"derived":["arguments"]`},
		"request cut":        {cut, `"derived":["result"]`},
		"result not derived": {other, `"derived":["arguments"]`},
		"second duplicate":   {dup, `"derived":["result"]`},
		"no bodies":          {hindsight.Step{Method: "ping", Source: "s", Seq: 1}, ""},
	}
}

// TestCompactStep: the compact encoding leaves out exactly the bodies
// that can be derived, and decoding it gives back the step AppendStep
// encodes.
func TestCompactStep(t *testing.T) {
	for name, tc := range compactCases() {
		t.Run(name, func(t *testing.T) {
			full, err := AppendStep(nil, &tc.step)
			if err != nil {
				t.Fatal(err)
			}
			compact, err := AppendCompactStep([]byte("x"), &tc.step)
			if err != nil {
				t.Fatal(err)
			}
			if compact[0] != 'x' {
				t.Fatal("AppendCompactStep did not append")
			}
			compact = compact[1:]
			if !json.Valid(compact) {
				t.Fatalf("invalid JSON: %s", compact)
			}
			if got := strings.Contains(string(compact), `"derived"`); got != (tc.derived != "") || !strings.Contains(string(compact), tc.derived) {
				t.Errorf("compact encoding %s, want %s", compact, tc.derived)
			}
			if tc.derived != "" && len(compact) >= len(full) {
				t.Errorf("compact encoding (%d bytes) no shorter than the full one (%d)", len(compact), len(full))
			}
			var back hindsight.Step
			if err := UnmarshalCompact(compact, &back); err != nil {
				t.Fatal(err)
			}
			again, err := AppendStep(nil, &back)
			if err != nil {
				t.Fatal(err)
			}
			if string(again) != string(full) {
				t.Errorf("round trip:\n%s\nwant\n%s", again, full)
			}
		})
	}
}

// TestDerivedBodiesAlias: the derived bodies are slices of the request and
// response, not copies, and appending to them cannot write into those.
func TestDerivedBodiesAlias(t *testing.T) {
	for _, tc := range []struct {
		method, body, want string
		result             bool
	}{
		{"tools/call", `{"method":"tools/call","params":{"name":"x","arguments":{"a":[1, 2]}}}`, `{"a":[1, 2]}`, false},
		{"tools/list", `{"method":"tools/list","params":{"cursor":"c"}} `, `{"cursor":"c"}`, false},
		{"tools/call", `{"params":{"arguments":"s"},"params":{"arguments":1}}`, `"s"`, false},
		{"", `{"id":1,"result":{"content":[]},"result":2}`, `{"content":[]}`, true},
		{"", `{"id":1,"result":null}`, `null`, true},
		{"tools/call", `{"params":{"name":"x"}}`, ``, false},
		{"", `{"id":1,"error":{"code":1}}`, ``, true},
		{"tools/call", `[1]`, ``, false},
		{"", `not json`, ``, true},
	} {
		body := json.RawMessage(tc.body)
		var got json.RawMessage
		if tc.result {
			got = ResponseResult(body)
		} else {
			got = RequestArguments(tc.method, body)
		}
		if string(got) != tc.want {
			t.Errorf("%s %s: got %q, want %q", tc.method, tc.body, got, tc.want)
			continue
		}
		if len(got) == 0 {
			if got != nil {
				t.Errorf("%s: empty body is not nil", tc.body)
			}
			continue
		}
		i := strings.Index(tc.body, tc.want)
		if &got[0] != &body[i] || cap(got) != len(got) {
			t.Errorf("%s: not a capped slice of the body at %d", tc.body, i)
		}
		_ = append(got, 'X')
		if string(body) != tc.body {
			t.Errorf("appending to the derived body changed the body: %s", body)
		}
	}
}

func TestStepDeriveUnknown(t *testing.T) {
	var s hindsight.Step
	if err := Derive(&s, []string{"request"}); err == nil {
		t.Error("Derive accepted an unknown body")
	}
	if err := UnmarshalCompact([]byte(`{"method":"x","derived":["nope"]}`), &s); err == nil {
		t.Error("UnmarshalCompact accepted an unknown body")
	}
}

// FuzzCompactStep: whatever the bodies, the compact encoding decodes
// to the step the full one decodes to.
func FuzzCompactStep(f *testing.F) {
	f.Add("tools/call", `{"params":{"arguments":{"a":1}}}`, `{"a":1}`, `{"result":[1]}`, `[1]`)
	f.Add("x", `{"params":[1]}`, `[1]`, `{"result":{},"result":1}`, `{}`)
	f.Add("tools/call", `"cut"`, `{}`, `null`, `null`)
	f.Fuzz(func(t *testing.T, method, req, args, resp, res string) {
		s := hindsight.Step{Method: method}
		for _, b := range []struct {
			dst *json.RawMessage
			v   string
		}{{&s.Request, req}, {&s.Arguments, args}, {&s.Response, resp}, {&s.Result, res}} {
			if json.Valid([]byte(b.v)) {
				*b.dst = json.RawMessage(b.v)
			}
		}
		full, err := AppendStep(nil, &s)
		if err != nil || !json.Valid(full) {
			return // bodies AppendStep cannot carry (whitespace around them is kept, so still valid)
		}
		compact, err := AppendCompactStep(nil, &s)
		if err != nil {
			t.Fatal(err)
		}
		var want, got hindsight.Step
		if err := json.Unmarshal(full, &want); err != nil {
			t.Fatal(err)
		}
		if err := UnmarshalCompact(compact, &got); err != nil {
			t.Fatalf("decode %s: %v", compact, err)
		}
		a, _ := AppendStep(nil, &got)
		b, _ := AppendStep(nil, &want)
		if string(a) != string(b) {
			t.Fatalf("compact %s decodes to\n%s\nthe full encoding to\n%s", compact, a, b)
		}
	})
}
