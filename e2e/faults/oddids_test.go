//go:build linux

package faults

import (
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// plainHome is a home in a temporary directory, injection off.
func plainHome(t *testing.T) hindsight.Home {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes; not in -short mode")
	}
	home := hindsight.Home(testbin.HomeWith(t, "inject:\n  instructions: false\n  error_results: false\n  query_tool: false\n"))
	if err := home.Ensure(); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestOddIDs sends requests the sidecar cannot relay through a real
// `hindsight wrap`: each gets a JSON-RPC error the agent can match (its id,
// or null where none can be read), and the relay goes on.
func TestOddIDs(t *testing.T) {
	a := wrapFake(t, plainHome(t))
	a.initialize()
	for _, tt := range []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`{"jsonrpc":"2.0","id":[1,2],"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`{"jsonrpc":"1.0","id":"old-1","method":"tools/list"}`, `{"jsonrpc":"2.0","id":"old-1","error":{"code":-32600,`},
		{`{"id":9,"method":"ping"}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32600,`},
		{`17`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`{"jsonrpc":"2.0","id":3,"method":`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
	} {
		a.Send(tt.send)
		if got := a.Recv(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s answered %s, want %s…", tt.send, got, tt.want)
		}
	}
	a.echoCalls("ok", 100, 1, 10, 1)
}
