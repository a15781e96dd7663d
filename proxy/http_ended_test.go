package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// TestHTTPSessionEnded checks that SessionEnded hears of each agent session
// once, however it ends, and never of a sessionless request.
func TestHTTPSessionEnded(t *testing.T) {
	for _, tc := range []struct {
		name string
		idle time.Duration
		end  func(t *testing.T, h *proxy.HTTPHandler, url, sid string)
	}{
		{"delete", -1, func(t *testing.T, _ *proxy.HTTPHandler, url, sid string) {
			req, _ := http.NewRequest(http.MethodDelete, url, nil)
			req.Header.Set("Mcp-Session-Id", sid)
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("DELETE: status %d", resp.StatusCode)
			}
		}},
		{"idle", 50 * time.Millisecond, func(*testing.T, *proxy.HTTPHandler, string, string) {}},
		{"close", -1, func(_ *testing.T, h *proxy.HTTPHandler, _, _ string) { h.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(&recorder{})
			t.Cleanup(up.Close)
			ended := make(chan *proxy.Session, 4)
			h := &proxy.HTTPHandler{
				Upstream: &proxy.HTTPUpstream{URL: up.URL + "/mcp", Transport: proxy.TransportStreamable}, Server: "rec",
				Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
				IdleTimeout: tc.idle,
				SessionEnded: func(s *proxy.Session) {
					ended <- s
				},
			}
			srv := httptest.NewServer(h)
			var once sync.Once
			closeAll := func() { once.Do(func() { h.Close(); srv.Close() }) }
			t.Cleanup(closeAll)
			url := srv.URL + "/mcp"

			// A sessionless (2026-07-28) request has no session to end.
			resp := postMCP(t, url, "", []byte(`{"jsonrpc":"2.0","id":7,"method":"server/discover"}`), nil)
			resp.Body.Close()

			sid := initialize(t, url, nil)
			tc.end(t, h, url, sid)
			select {
			case s := <-ended:
				if s.ID != sid || s.Server != "rec" || s.Transport != proxy.TransportStreamable {
					t.Fatalf("SessionEnded(%+v), want session %s of rec", s, sid)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("SessionEnded was not called")
			}
			closeAll()
			select {
			case s := <-ended:
				t.Fatalf("SessionEnded called again, for %+v", s)
			default:
			}
		})
	}
}
