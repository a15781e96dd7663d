package proxy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/wire"
	"github.com/tidwall/gjson"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   Kind
		id     string // "" for none
		method string
		err    error
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, KindRequest, "1", "tools/list", nil},
		{"string id", `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`, KindRequest, `"a-1"`, "ping", nil},
		{"null id request", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, KindRequest, "null", "ping", nil},
		{"float id kept as written", `{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, KindRequest, "1.0", "ping", nil},
		{"members in any order", `{"method":"x/y","params":{"id":9,"method":"inner"},"id":7,"jsonrpc":"2.0"}`, KindRequest, "7", "x/y", nil},
		{"escaped method", `{"jsonrpc":"2.0","id":2,"method":"tools\/call"}`, KindRequest, "2", "tools/call", nil},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, "", "notifications/initialized", nil},
		{"result", `{"jsonrpc":"2.0","id":3,"result":{}}`, KindResponse, "3", "", nil},
		{"error response", `{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}`, KindResponse, `"x"`, "", nil},
		{"null result", `{"jsonrpc":"2.0","id":3,"result":null}`, KindResponse, "3", "", nil},
		{"whitespace and CRLF", " {\"jsonrpc\" : \"2.0\", \"id\" : 4 , \"result\" : 1}\r\n", KindResponse, "4", "", nil},
		{"first duplicate wins", `{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}`, KindRequest, "1", "a", nil},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, KindBatch, "", "", nil},
		{"empty batch is still a batch", `[]`, KindBatch, "", "", nil},
		{"not json", `{"jsonrpc":"2.0",`, KindInvalid, "", "", ErrParse},
		{"empty", ``, KindInvalid, "", "", ErrParse},
		{"blank", "  \r\n", KindInvalid, "", "", ErrParse},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"a"} x`, KindInvalid, "", "", ErrParse},
		{"scalar", `"hello"`, KindInvalid, "", "", ErrInvalid},
		{"no version, id readable", `{"id":5,"method":"a"}`, KindInvalid, "5", "", ErrInvalid},
		{"wrong version", `{"jsonrpc":"1.0","id":5,"method":"a"}`, KindInvalid, "5", "", ErrInvalid},
		{"numeric version", `{"jsonrpc":2.0,"id":5,"method":"a"}`, KindInvalid, "5", "", ErrInvalid},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"a"}`, KindInvalid, "", "", ErrInvalid},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"a"}`, KindInvalid, "", "", ErrInvalid},
		{"method not a string", `{"jsonrpc":"2.0","id":6,"method":7}`, KindInvalid, "6", "", ErrInvalid},
		{"response without result", `{"jsonrpc":"2.0","id":8}`, KindInvalid, "8", "", ErrInvalid},
		{"result without id", `{"jsonrpc":"2.0","result":{}}`, KindInvalid, "", "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if m.Kind != tt.kind {
				t.Errorf("kind = %v, want %v", m.Kind, tt.kind)
			}
			if string(m.ID) != tt.id {
				t.Errorf("id = %q, want %q", m.ID, tt.id)
			}
			if m.Method != tt.method {
				t.Errorf("method = %q, want %q", m.Method, tt.method)
			}
		})
	}
}

func TestParseKeepsBytes(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":"é\u00e9"}}` + "\r\n")
	m, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := in[:len(in)-2]; string(m.Raw) != string(want) || &m.Raw[0] != &in[0] {
		t.Errorf("Raw = %q: want the input without its terminator, not a copy", m.Raw)
	}
	// The id is a sub-slice of Raw whose capacity ends with it; the method
	// is a copy: changing the input leaves it alone.
	if &m.ID[0] != &in[len(`{"jsonrpc":"2.0","id":`)] || cap(m.ID) != len(m.ID) {
		t.Errorf("id %s is not a capped sub-slice of the input", m.ID)
	}
	in[len(`{"jsonrpc":"2.0","id":1,"method":"`)] = 'z'
	if m.Method != "a" {
		t.Errorf("method %q aliases the input", m.Method)
	}
	if tools, _ := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)); tools.Method != "tools/call" {
		t.Errorf("method %q", tools.Method)
	}
}

func TestErrorResponse(t *testing.T) {
	tests := []struct {
		id   json.RawMessage
		code int
		msg  string
		want string
	}{
		{nil, CodeParseError, "Parse error", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{json.RawMessage(`"a"`), CodeServerUnavailable, "server \"x\" exited\n", `{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"server \"x\" exited\n"}}`},
		{json.RawMessage(`7`), CodeInvalidRequest, "<&>", `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"\u003c\u0026\u003e"}}`},
	}
	for _, tt := range tests {
		got := ErrorResponse(tt.id, tt.code, tt.msg)
		if string(got) != tt.want {
			t.Errorf("ErrorResponse(%s, %d, %q) = %s, want %s", tt.id, tt.code, tt.msg, got, tt.want)
		}
		if m, err := Parse(got); err != nil || m.Kind != KindResponse {
			t.Errorf("ErrorResponse output does not parse as a response: %v", err)
		}
	}
	if got := string(ResultResponse(json.RawMessage(`"q"`), json.RawMessage(`{"a":1}`))); got != `{"jsonrpc":"2.0","id":"q","result":{"a":1}}` {
		t.Errorf("ResultResponse = %s", got)
	}
}

// TestParseDeepNesting checks that pathological nesting is rejected (or
// accepted) without exhausting the stack, on both validation paths.
func TestParseDeepNesting(t *testing.T) {
	deep := func(n int) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	tests := []struct {
		n    int
		want error
	}{
		{100, nil},
		{wire.MaxNesting - 10, nil},
		{20 << 20, ErrParse}, // encoding/json's limit is 10000 levels
	}
	for _, tt := range tests {
		if _, err := Parse(deep(tt.n)); err != tt.want {
			t.Errorf("nesting %d: err %v, want %v", tt.n, err, tt.want)
		}
	}
	// Many brackets side by side are not deep: still valid.
	wide := []byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":[` + strings.Repeat("[],", wire.MaxNesting) + `[]]}`)
	if _, err := Parse(wide); err != nil {
		t.Errorf("wide message: %v", err)
	}
}

// TestParseParamsMembers checks the tool name and _meta found while params
// is validated against gjson, which the hooks' callers used before.
func TestParseParamsMembers(t *testing.T) {
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"name":"inner"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"name":"inner","_meta":{}},"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e\"cho\u00e9","_meta":{"progressToken":7}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"escaped-key","_meta":{"progressToken":"t"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"first","name":"second"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":42}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{ }}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[{"name":"x"}]}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
		`{"params":{"_meta":{"progressToken":"p"},"name":"late"},"method":"tools/call","id":"a","jsonrpc":"2.0"}`,
	} {
		m, err := Parse([]byte(raw))
		if err != nil {
			t.Fatalf("Parse(%s): %v", raw, err)
		}
		params := gjson.GetBytes([]byte(raw), "params")
		wantName := ""
		if params.IsObject() {
			wantName = params.Get("name").String()
		}
		if got := m.paramString(m.name); got != wantName {
			t.Errorf("%s: name %q, want %q", raw, got, wantName)
		}
		wantTok := ""
		if params.IsObject() {
			wantTok = params.Get("_meta.progressToken").Raw
		}
		gotTok := ""
		if meta := m.member(m.meta); meta != nil {
			gotTok = gjson.GetBytes(meta, "progressToken").Raw
		}
		if gotTok != wantTok {
			t.Errorf("%s: progress token %q, want %q", raw, gotTok, wantTok)
		}
	}
	// Invalid params are still refused.
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name" "echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ec` + "\x01" + `ho"}}`,
	} {
		if _, err := Parse([]byte(raw)); err != ErrParse {
			t.Errorf("Parse(%s) = %v, want ErrParse", raw, err)
		}
	}
}
