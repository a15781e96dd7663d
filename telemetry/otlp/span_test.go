package otlp

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
	"go.opentelemetry.io/otel/attribute"
)

func TestDescribe(t *testing.T) {
	stdio := &proxy.Session{ID: "s-1", Server: "files", Transport: "stdio"}
	stdio.SetClient("agent", "1.0", "2025-06-18")
	httpSession := &proxy.Session{ID: "abc", Server: "web", Transport: "streamable-http"}
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name     string
		ex       proxy.Exchange
		span     string
		want     map[string]string // attribute → value; "" must be absent
		errType  string
		parented bool
	}{{
		name: "success over stdio",
		ex: proxy.Exchange{Session: stdio, ID: json.RawMessage(`7`),
			Request:  []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read","arguments":{"token":"s3cret"}}}`),
			Response: []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"s3cret"}]}}`)},
		span: "tools/call read",
		want: map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read",
			"jsonrpc.request.id": "7", "mcp.session.id": "s-1", "mcp.protocol.version": "2025-06-18", "network.transport": "pipe",
			"network.protocol.name": "", "hindsight.server.name": "files", "hindsight.transport": "stdio", "error.type": "", "rpc.response.status_code": ""},
	}, {
		name: "JSON-RPC error over HTTP, protocol from _meta",
		ex: proxy.Exchange{Session: httpSession, ID: json.RawMessage(`"req-2"`),
			Request:  []byte(`{"jsonrpc":"2.0","id":"req-2","method":"tools/call","params":{"name":"nope","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`),
			Response: []byte(`{"jsonrpc":"2.0","id":"req-2","error":{"code":-32602,"message":"unknown tool nope: key=s3cret"}}`)},
		span: "tools/call nope",
		want: map[string]string{"jsonrpc.request.id": "req-2", "network.transport": "tcp", "network.protocol.name": "http",
			"mcp.protocol.version": "2026-07-28", "error.type": "-32602", "rpc.response.status_code": "-32602"},
		errType: "-32602",
	}, {
		name: "tool error",
		ex: proxy.Exchange{Session: stdio, ID: json.RawMessage(`3`),
			Request:  []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fail"}}`),
			Response: []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":true}}`)},
		span: "tools/call fail", want: map[string]string{"error.type": "tool_error", "rpc.response.status_code": ""}, errType: "tool_error",
	}, {
		name: "cancelled, answered locally, null id, no session",
		ex: proxy.Exchange{ID: json.RawMessage(`null`), Cancelled: true, Local: true,
			Request: []byte(`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"query_hindsight"}}`)},
		span:    "tools/call query_hindsight",
		want:    map[string]string{"error.type": "cancelled", "hindsight.local": "true", "jsonrpc.request.id": "", "mcp.session.id": "", "network.transport": ""},
		errType: "cancelled",
	}, {
		name: "transport failure, no tool name, traceparent",
		ex: proxy.Exchange{Session: stdio, ID: json.RawMessage(`9`), Failure: "server exited",
			Request: []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"traceparent":"` + tp + `"}}}`)},
		span: "tools/call", want: map[string]string{"error.type": "transport_failure", "gen_ai.tool.name": ""}, errType: "transport_failure", parented: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.ex.Method, tc.ex.Direction = "tools/call", hindsight.ClientToServer
			tc.ex.Started, tc.ex.Ended = time.Now(), time.Now()
			c := describe(&tc.ex)
			if c.name != tc.span {
				t.Errorf("span name %q, want %q", c.name, tc.span)
			}
			got := map[string]string{}
			for _, kv := range c.attrs {
				if _, dup := got[string(kv.Key)]; dup {
					t.Errorf("attribute %s twice", kv.Key)
				}
				got[string(kv.Key)] = kv.Value.Emit()
				if strings.Contains(kv.Value.Emit(), "s3cret") {
					t.Errorf("attribute %s carries the arguments or result: %q", kv.Key, kv.Value.Emit())
				}
			}
			for k, v := range tc.want {
				if g, ok := got[k]; v == "" && ok {
					t.Errorf("%s = %q, want it absent", k, g)
				} else if v != "" && g != v {
					t.Errorf("%s = %q, want %q", k, g, v)
				}
			}
			if c.errType != tc.errType {
				t.Errorf("error type %q, want %q", c.errType, tc.errType)
			}
			if c.parent.IsValid() != tc.parented {
				t.Errorf("parent valid %v, want %v", c.parent.IsValid(), tc.parented)
			}
			if c.attrs[0] != attribute.String("mcp.method.name", "tools/call") {
				t.Errorf("first attribute %v", c.attrs[0])
			}
		})
	}
}

func TestTraced(t *testing.T) {
	for _, tc := range []struct {
		method string
		dir    hindsight.Direction
		want   bool
	}{
		{"tools/call", hindsight.ClientToServer, true},
		{"tools/list", hindsight.ClientToServer, false},
		{"tools/call", hindsight.ServerToClient, false},
		{"sampling/createMessage", hindsight.ServerToClient, false},
	} {
		if got := traced(&proxy.Exchange{Method: tc.method, Direction: tc.dir}); got != tc.want {
			t.Errorf("traced(%s, %s) = %v, want %v", tc.method, tc.dir, got, tc.want)
		}
	}
}
