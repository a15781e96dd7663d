package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

// TestHTTPRecordBeforeAnswer checks that on HTTP the Record hook sees a
// call before its answer reaches the agent (a sidecar killed once the
// agent has its answer has recorded it), whether the upstream answers in
// JSON, in an event stream, or fails (the error the sidecar sends in its
// place), and that Exchange sees the call afterwards with Record's mark.
func TestHTTPRecordBeforeAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ct     string
		body   string
		want   string // in the agent's answer
	}{
		{"json", 200, "application/json", `{"jsonrpc":"2.0","id":"watched","result":{"content":[]}}`, `"result"`},
		{"event-stream", 200, "text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"watched\",\"result\":{}}\n\n", `"result"`},
		{"upstream-error", http.StatusBadGateway, "text/plain", "down", `upstream HTTP 502`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{answer: func(body []byte) (int, string, []byte) {
				if gjson.GetBytes(body, "method").Str == "initialize" {
					return 200, "application/json", []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"r","version":"1"}}}`)
				}
				return tc.status, tc.ct, []byte(tc.body)
			}}
			entered, release := make(chan struct{}), make(chan struct{})
			var recorded, unmarked atomic.Int32
			url := sidecar(t, rec, func(h *proxy.HTTPHandler) {
				h.Hooks = &proxy.Hooks{
					Record: func(exs []*proxy.Exchange) {
						for _, ex := range exs {
							if bytes.Contains(ex.Request, []byte(`"watched"`)) {
								recorded.Add(1)
								close(entered)
								<-release // the answer waits for the record
							}
							ex.Recorded = true
						}
					},
					Exchange: func(ex *proxy.Exchange) {
						if bytes.Contains(ex.Request, []byte(`"watched"`)) && !ex.Recorded {
							unmarked.Add(1)
						}
					},
				}
			})
			sid := initialize(t, url, nil)
			answered := make(chan string, 1)
			go func() {
				resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":"watched","method":"tools/call","params":{"name":"x"}}`), nil)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				answered <- string(b)
			}()
			select {
			case <-entered:
			case got := <-answered:
				t.Fatalf("the agent had its answer before Record saw the call: %s", got)
			}
			select {
			case got := <-answered:
				t.Fatalf("the agent had its answer while Record was still running: %s", got)
			default:
			}
			close(release)
			if got := <-answered; !strings.Contains(got, tc.want) || !strings.Contains(got, `"watched"`) {
				t.Fatalf("answered %s, want %s for id watched", got, tc.want)
			}
			if recorded.Load() != 1 || unmarked.Load() != 0 {
				t.Errorf("Record saw the call %d times; %d reached Exchange unmarked", recorded.Load(), unmarked.Load())
			}
		})
	}
}
