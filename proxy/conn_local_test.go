package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestConnLocalToolCall(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":"q1","method":"tools/call","params":{"name":"query_hindsight","arguments":{"situation":"s"}}}`
	tests := []struct {
		name    string
		handler LocalHandler
		want    string
	}{
		{"result", func(ctx context.Context) (json.RawMessage, error) {
			return json.RawMessage(`{"content":[{"type":"text","text":"lesson"}]}`), nil
		}, `{"jsonrpc":"2.0","id":"q1","result":{"content":[{"type":"text","text":"lesson"}]}}`},
		{"pretty result", func(ctx context.Context) (json.RawMessage, error) {
			return json.RawMessage("{\n\"content\": []\n}"), nil
		}, `{"jsonrpc":"2.0","id":"q1","result":{"content":[]}}`},
		{"error", func(ctx context.Context) (json.RawMessage, error) {
			return nil, errors.New("daemon down")
		}, `{"jsonrpc":"2.0","id":"q1","error":{"code":-32603,"message":"daemon down"}}`},
		{"invalid JSON", func(ctx context.Context) (json.RawMessage, error) {
			return json.RawMessage(`{`), nil
		}, `{"jsonrpc":"2.0","id":"q1","error":{"code":-32603,"message":"hindsight: query_hindsight returned an invalid result"}}`},
		{"nothing", func(ctx context.Context) (json.RawMessage, error) {
			return nil, nil
		}, `{"jsonrpc":"2.0","id":"q1","error":{"code":-32603,"message":"hindsight: query_hindsight returned an invalid result"}}`},
		{"panic", func(ctx context.Context) (json.RawMessage, error) {
			panic("handler boom")
		}, `{"jsonrpc":"2.0","id":"q1","error":{"code":-32603,"message":"hindsight: query_hindsight failed"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotName, gotParams string
			c, log, _ := connUnderTest(Hooks{ToolCall: func(s *Session, name string, params json.RawMessage) LocalHandler {
				gotName, gotParams = name, string(params)
				if name != "query_hindsight" {
					return nil
				}
				return tt.handler
			}})
			a := c.FromClient([]byte(call))
			if a.Local == nil || a.Forward != nil || a.Reply != nil {
				t.Fatalf("action %+v, want Local", a)
			}
			if gotName != "query_hindsight" || gotParams != `{"name":"query_hindsight","arguments":{"situation":"s"}}` {
				t.Errorf("hook saw %q %s", gotName, gotParams)
			}
			if c.Pending() != 0 {
				t.Errorf("a local call counts as pending toward the server")
			}
			if got := a.Local(context.Background()); string(got) != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
			exs := log.all()
			if len(exs) != 1 || !exs[0].Local || string(exs[0].Response) != tt.want {
				t.Fatalf("exchange %+v", exs)
			}
			// Other tools are forwarded.
			other := strings.Replace(call, "query_hindsight", "read_file", 1)
			mustForward(t, c.FromClient([]byte(other)), other)
		})
	}
	// A panicking ToolCall hook forwards the call.
	c, _, _ := connUnderTest(Hooks{ToolCall: func(*Session, string, json.RawMessage) LocalHandler { panic("x") }})
	mustForward(t, c.FromClient([]byte(call)), call)
}
