package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// A Conn with Hooks, fed by hand as a transport would feed it: the hook adds
// a line to a tool's result, and Exchange sees the pair once it was relayed.
func ExampleHooks() {
	hooks := &proxy.Hooks{
		ToolResult: func(ctx context.Context, ex *proxy.Exchange, result json.RawMessage) json.RawMessage {
			var r struct {
				Content []map[string]any `json:"content"`
				IsError bool             `json:"isError"`
			}
			if json.Unmarshal(result, &r) != nil || !r.IsError {
				return nil // keep the result as it came
			}
			r.Content = append(r.Content, map[string]any{"type": "text", "text": "hint: call login first"})
			out, _ := json.Marshal(r)
			return out
		},
		Exchange: func(ex *proxy.Exchange) {
			fmt.Printf("exchange: %s id=%s answered=%v\n", ex.Method, ex.ID, ex.Response != nil)
		},
	}
	conn := &proxy.Conn{Hooks: hooks, Session: proxy.NewStdioSession("orders")}

	act := conn.FromClient([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_orders"}}`))
	fmt.Printf("to server: %s\n", act.Forward)

	out := conn.FromServer([]byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"not logged in"}],"isError":true}}`))
	fmt.Printf("to agent: %s\n", out)
	// Output:
	// to server: {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_orders"}}
	// exchange: tools/call id=7 answered=true
	// to agent: {"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"not logged in","type":"text"},{"text":"hint: call login first","type":"text"}],"isError":true}}
}
