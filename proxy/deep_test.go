package proxy

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/wire"
)

func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func TestTooDeepID(t *testing.T) {
	over := nested(wire.MaxNesting + 5)
	tests := []struct {
		name   string
		raw    string
		id     string
		isDeep bool
	}{
		{"id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":` + over + `}}`, "7", true},
		{"id last", `{"jsonrpc":"2.0","method":"tools/call","params":{"x":` + over + `},"id":"a-1"}`, `"a-1"`, true},
		{"deep objects", `{"id":-3.5,"params":` + strings.Repeat(`{"a":`, wire.MaxNesting+1) + `1` + strings.Repeat("}", wire.MaxNesting+1) + `}`, "-3.5", true},
		{"no id (a notification)", `{"jsonrpc":"2.0","method":"n","params":` + over + `}`, "", true},
		{"object id is no id", `{"id":{"a":1},"params":` + over + `}`, "", true},
		{"deep but broken", `{"id":1,"params":` + over[:len(over)-1] + `}`, "", false},
		{"deep with garbage after", `{"id":1,"params":` + over + `} x`, "", false},
		{"not deep", `{"id":1,"params":` + nested(10) + `}`, "", false},
		{"deep with the message's own level", `{"id":1,"params":` + nested(wire.MaxNesting) + `}`, "1", true},
		{"as deep as allowed", `{"id":1,"params":` + nested(wire.MaxNesting-1) + `}`, "", false},
		{"not an object", over, "", false},
		{"invalid JSON", `{"id":1,`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, deep := tooDeepID([]byte(tt.raw))
			if deep != tt.isDeep || string(id) != tt.id {
				t.Errorf("tooDeepID = %q, %v; want %q, %v", id, deep, tt.id, tt.isDeep)
			}
		})
	}
}

// TestConnAnswersTooDeepWithItsID: a request nested deeper than any peer
// reads is answered for its own id, so its sender does not wait for ever.
func TestConnAnswersTooDeepWithItsID(t *testing.T) {
	c := &Conn{Session: &Session{ID: "s", Server: "srv"}, Logger: slog.New(slog.DiscardHandler)}
	raw := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"x":` + nested(wire.MaxNesting+1) + `}}}`
	a := c.FromClient([]byte(raw))
	if a.Forward != nil {
		t.Fatal("a too-deep message was forwarded")
	}
	var reply struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.Reply, &reply); err != nil {
		t.Fatalf("reply %s: %v", a.Reply, err)
	}
	if string(reply.ID) != "42" || reply.Error.Code != CodeInvalidRequest {
		t.Errorf("reply %s, want code %d for id 42", a.Reply, CodeInvalidRequest)
	}
}

// FuzzTooDeepID: what encoding/json accepts is never called too deep, and
// an id found is a JSON string or number.
func FuzzTooDeepID(f *testing.F) {
	f.Add([]byte(`{"id":1,"params":[[[]]]}`))
	f.Add([]byte(`{"id":"x","params":` + nested(wire.MaxNesting+1) + `}`))
	f.Add([]byte(`{"a":{"b":[1,{"c":"\"}"}]},"id":2}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		id, deep := tooDeepID(raw)
		if deep && json.Valid(raw) {
			t.Fatalf("valid JSON called too deep: %q", raw)
		}
		if id != nil {
			var v any
			if err := json.Unmarshal(id, &v); err != nil {
				t.Fatalf("id %q is not JSON: %v", id, err)
			}
			switch v.(type) {
			case string, float64:
			default:
				t.Fatalf("id %q is no string or number", id)
			}
		}
	})
}

// TestConnRefusesIDInFlight: a request whose id is already in flight is
// answered at once and not forwarded, so the first request's answer cannot
// be paired with the second's arguments; once the first is answered the id
// may be used again.
func TestConnRefusesIDInFlight(t *testing.T) {
	c := &Conn{Session: &Session{ID: "s", Server: "srv"}, Logger: slog.New(slog.DiscardHandler)}
	first := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a","arguments":{"n":1}}}`
	second := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"b","arguments":{"n":2}}}`
	if a := c.FromClient([]byte(first)); a.Forward == nil {
		t.Fatal("first request not forwarded")
	}
	a := c.FromClient([]byte(second))
	if a.Forward != nil || !strings.Contains(string(a.Reply), `"id":5`) || !strings.Contains(string(a.Reply), `-32600`) {
		t.Fatalf("duplicate id: forward %s, reply %s", a.Forward, a.Reply)
	}
	if out := c.FromServer([]byte(`{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`)); out == nil {
		t.Fatal("the first request's answer was not relayed")
	}
	if a := c.FromClient([]byte(second)); a.Forward == nil {
		t.Fatalf("id 5 refused after its request was answered: %s", a.Reply)
	}
}
