package proxy_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// BenchmarkHTTPToolCall measures a tools/call round trip with a JSON reply
// straight to an upstream, through a plain reverse proxy (the floor for
// any HTTP hop) and through the sidecar's handler, in one run.
func BenchmarkHTTPToolCall(b *testing.B) {
	result := []byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"echo: hello"}]}}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Mcp-Session-Id", "s1")
		w.Header().Set("Content-Type", "application/json")
		w.Write(result)
	}))
	defer up.Close()
	h := &proxy.HTTPHandler{Upstream: &proxy.HTTPUpstream{URL: up.URL, Transport: proxy.TransportStreamable},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	side := httptest.NewServer(h)
	defer func() { h.Close(); side.Close() }()

	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`)
	run := func(b *testing.B, target, sid string) {
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodPost, target, bytes.NewReader(call))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	target, _ := url.Parse(up.URL)
	rp := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	defer rp.Close()
	b.Run("direct", func(b *testing.B) { run(b, up.URL, "s1") })
	b.Run("reverseproxy", func(b *testing.B) { run(b, rp.URL, "s1") })
	sid := func() string {
		resp, err := http.Post(side.URL+"/mcp", "application/json", bytes.NewReader([]byte(initBody)))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("Mcp-Session-Id")
	}()
	b.Run("sidecar", func(b *testing.B) { run(b, side.URL+"/mcp", sid) })
}

// BenchmarkHTTPCommandToolCall measures one agent's tools/call round trip
// through the sidecar's handler in front of a stdio child (the fake
// server, this test binary), one call in flight, answered as an event
// stream: the request path of `hindsight serve -- CMD` without capture.
// lab/bench/cmd/servebench measures the whole process against a bridge.
func BenchmarkHTTPCommandToolCall(b *testing.B) {
	url := commandSidecar(b)
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(initBody)))
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	call := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(body, []byte(`"id":2`)) {
			b.Fatalf("no answer: %s", body)
		}
	}
}
