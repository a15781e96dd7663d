package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
)

// thief is a server the sidecar must never send anything to: it counts
// the requests that reach it and the credentials they carry.
type thief struct {
	mu       sync.Mutex
	requests int
	creds    []string
}

func (th *thief) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	th.mu.Lock()
	th.requests++
	for _, k := range []string{"Authorization", "X-Api-Key"} {
		if v := r.Header.Get(k); v != "" {
			th.creds = append(th.creds, k+": "+v)
		}
	}
	th.mu.Unlock()
	// Refuse, so that a sidecar that came here fails fast instead of
	// waiting for an answer.
	w.WriteHeader(http.StatusForbidden)
}

func (th *thief) check(t *testing.T) {
	t.Helper()
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.requests > 0 {
		t.Errorf("another host got %d requests from the sidecar, with credentials %q", th.requests, th.creds)
	}
}

// TestHTTPHostHeader: a page whose name was rebound to 127.0.0.1 sends its
// own name as Host; only loopback names and configured ones are answered.
func TestHTTPHostHeader(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(h *proxy.HTTPHandler)
		host      string
		status    int
	}{
		{"loopback address", nil, "127.0.0.1:%s", http.StatusOK},
		{"localhost", nil, "localhost:%s", http.StatusOK},
		{"ipv6 loopback", nil, "[::1]:%s", http.StatusOK},
		{"rebound name", nil, "attacker.example:%s", http.StatusMisdirectedRequest},
		{"rebound name, no port", nil, "attacker.example", http.StatusMisdirectedRequest},
		{"localhost lookalike", nil, "localhost.attacker.example:%s", http.StatusMisdirectedRequest},
		{"allowed host", func(h *proxy.HTTPHandler) { h.AllowedHosts = []string{"mcp.internal"} }, "mcp.internal:%s", http.StatusOK},
		{"allowed host and port", func(h *proxy.HTTPHandler) { h.AllowedHosts = []string{"mcp.internal:1"} }, "mcp.internal:1", http.StatusOK},
		{"not the allowed one", func(h *proxy.HTTPHandler) { h.AllowedHosts = []string{"mcp.internal"} }, "attacker.example:%s", http.StatusMisdirectedRequest},
		{"remote, allowed hosts set", func(h *proxy.HTTPHandler) { h.AllowRemote, h.AllowedHosts = true, []string{"mcp.internal"} }, "attacker.example:%s", http.StatusMisdirectedRequest},
		{"remote, any host", func(h *proxy.HTTPHandler) { h.AllowRemote = true }, "box.lan:%s", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			url := sidecar(t, rec, tc.configure)
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(url, "/mcp"), "http://"))
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Host = strings.ReplaceAll(tc.host, "%s", port)
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("Host %s: status %d, want %d: %s", req.Host, resp.StatusCode, tc.status, body)
			}
			rec.mu.Lock()
			n := len(rec.bodies)
			rec.mu.Unlock()
			if tc.status != http.StatusOK && n > 0 {
				t.Errorf("Host %s: refused, yet the upstream got %d requests", req.Host, n)
			}
		})
	}
}

// TestHTTPSSEEndpointCrossOrigin: a legacy SSE upstream whose endpoint
// event names another host does not get the agent's Authorization or the
// configured headers posted there.
func TestHTTPSSEEndpointCrossOrigin(t *testing.T) {
	th := &thief{}
	elsewhere := httptest.NewServer(th)
	defer elsewhere.Close()
	for _, tc := range []struct{ name, endpoint string }{
		{"absolute URL on another host", elsewhere.URL + "/message?sessionId=1"},
		{"scheme-relative URL", "//" + strings.TrimPrefix(elsewhere.URL, "http://") + "/message"},
		{"same host, another port", strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1) + "/message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet {
					w.WriteHeader(http.StatusAccepted)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "event: endpoint\ndata: %s\n\n", tc.endpoint)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			defer up.Close()
			h := &proxy.HTTPHandler{
				Upstream: &proxy.HTTPUpstream{URL: up.URL + "/sse", Transport: proxy.TransportSSE,
					Header: http.Header{"X-Api-Key": {"configured-secret"}}},
				Server: "sse", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			srv := httptest.NewServer(h)
			defer func() { h.Close(); srv.Close() }()
			resp := postMCP(t, srv.URL+"/mcp", "", []byte(initBody), map[string]string{"Authorization": "Bearer agent-secret"})
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if gjson.GetBytes(body, "result").Exists() || !strings.Contains(string(body), "another origin") {
				t.Errorf("initialize through a cross-origin endpoint: %d %s", resp.StatusCode, body)
			}
			th.check(t)
		})
	}
}

// TestHTTPRedirect: the upstream's redirects are followed within its
// origin, never to another host, which would get the configured headers
// (Go's client drops only Authorization and cookies).
func TestHTTPRedirect(t *testing.T) {
	th := &thief{}
	elsewhere := httptest.NewServer(th)
	defer elsewhere.Close()
	for _, tc := range []struct {
		name   string
		target func(self string) string
		ok     bool
	}{
		{"same origin", func(self string) string { return self + "/mcp" }, true},
		{"another host", func(string) string { return elsewhere.URL + "/mcp" }, false},
		{"same address, another name", func(string) string {
			return strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1) + "/mcp"
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			mux := http.NewServeMux()
			var self string
			mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tc.target(self), http.StatusTemporaryRedirect)
			})
			mux.Handle("/mcp", rec)
			up := httptest.NewServer(mux)
			defer up.Close()
			self = up.URL
			h := &proxy.HTTPHandler{
				Upstream: &proxy.HTTPUpstream{URL: up.URL + "/old", Transport: proxy.TransportStreamable,
					Header: http.Header{"X-Api-Key": {"configured-secret"}}},
				Server: "rec", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			srv := httptest.NewServer(h)
			defer func() { h.Close(); srv.Close() }()
			resp := postMCP(t, srv.URL+"/mcp", "", []byte(initBody), map[string]string{"Authorization": "Bearer agent-secret"})
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := gjson.GetBytes(body, "result").Exists(); got != tc.ok {
				t.Errorf("initialize answered %v, want %v: %s", got, tc.ok, body)
			}
			if tc.ok {
				if hdr, _ := rec.last(); hdr.Get("X-Api-Key") != "configured-secret" {
					t.Errorf("same-origin redirect lost the configured header: %v", hdr)
				}
			} else if !strings.Contains(string(body), "another origin") {
				t.Errorf("a refused redirect should say why: %s", body)
			}
			th.check(t)
		})
	}
}

// TestHTTPSessionLimit: sessions past MaxSessions (MaxChildren in front of
// a command) are refused with a JSON-RPC error, and a slot comes back when
// a session ends.
func TestHTTPSessionLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"http upstream, MaxSessions", func(t *testing.T) string {
			return sidecar(t, &recorder{}, func(h *proxy.HTTPHandler) { h.MaxSessions = 2 })
		}},
		{"command upstream, MaxChildren", func(t *testing.T) string {
			h := &proxy.HTTPHandler{
				Upstream: &proxy.CommandUpstream{
					Path: os.Args[0], Args: fakeserver.Args("TestStdioFakeServer"),
					Env: fakeserver.Env(fakeserver.ModeMCP, "", ""), Server: "fake",
					GracePeriod: 300 * time.Millisecond,
					Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
				},
				Server: "fake", MaxChildren: 2,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			srv := httptest.NewServer(h)
			t.Cleanup(func() { h.Close(); srv.Close() })
			return srv.URL + "/mcp"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url(t)
			first := initialize(t, url, nil)
			initialize(t, url, nil)
			resp := postMCP(t, url, "", []byte(initBody), nil)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || gjson.GetBytes(body, "error.code").Int() == 0 ||
				!strings.Contains(gjson.GetBytes(body, "error.message").Str, "session limit") || gjson.GetBytes(body, "id").Raw != "1" {
				t.Fatalf("third session: %d %s; want 503 and a JSON-RPC error for id 1", resp.StatusCode, body)
			}
			sse, err := testClient.Get(strings.TrimSuffix(url, "/mcp") + "/sse")
			if err != nil {
				t.Fatal(err)
			}
			sse.Body.Close()
			if sse.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("legacy SSE session past the limit: status %d, want 503", sse.StatusCode)
			}
			req, _ := http.NewRequest(http.MethodDelete, url, nil)
			req.Header.Set("Mcp-Session-Id", first)
			del, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			del.Body.Close()
			// The slot comes back once the session (and its child) is gone,
			// which DELETE does not wait for: retry until it does (the
			// deadline only turns a hang into a failure).
			deadline := time.Now().Add(time.Minute)
			for {
				resp := postMCP(t, url, "", []byte(initBody), nil)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no session after one was deleted: %d", resp.StatusCode)
				}
				time.Sleep(25 * time.Millisecond)
			}
		})
	}
}

// TestHTTPSlowBody: an agent trickling a body is answered 408 once
// BodyTimeout passes, instead of holding the request open: on /mcp and on
// the legacy message endpoint.
func TestHTTPSlowBody(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprint("legacy=", legacy), func(t *testing.T) {
			url := sidecar(t, &recorder{}, func(h *proxy.HTTPHandler) { h.BodyTimeout = 200 * time.Millisecond })
			addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
			path := "/mcp"
			if legacy {
				sse, err := testClient.Get("http://" + addr + "/sse")
				if err != nil {
					t.Fatal(err)
				}
				defer sse.Body.Close()
				br := bufio.NewReader(sse.Body)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("no endpoint event: %v", err)
					}
					if p, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
						path = p
						break
					}
				}
			}
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(time.Minute)) // a hang fails, not a slow machine
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				path, addr, len(initBody), initBody[:10])
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer to a trickled body: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("POST %s: status %d, want 408", path, resp.StatusCode)
			}
		})
	}
}

// TestHTTPOriginPolicy: beyond the sidecar's own origin, browsers'
// Origins pass when on AllowedHosts (no loopback name) or AllowedOrigins.
func TestHTTPOriginPolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		configure func(h *proxy.HTTPHandler)
		origin    string
		status    int
	}{
		{"another loopback port", nil, "http://localhost:6274", http.StatusForbidden},
		{"allowed origin", func(h *proxy.HTTPHandler) { h.AllowedOrigins = []string{"http://localhost:6274"} }, "http://localhost:6274", http.StatusNoContent},
		{"loopback on allowed hosts", func(h *proxy.HTTPHandler) { h.AllowedHosts = []string{"localhost"} }, "http://localhost:6274", http.StatusForbidden},
		{"foreign", nil, "https://attacker.example", http.StatusForbidden},
		{"allowed host", func(h *proxy.HTTPHandler) { h.AllowedHosts = []string{"app.internal"} }, "https://app.internal", http.StatusNoContent},
		{"remote, allowed hosts set", func(h *proxy.HTTPHandler) { h.AllowRemote, h.AllowedHosts = true, []string{"app.internal"} }, "https://attacker.example", http.StatusForbidden},
		{"remote", func(h *proxy.HTTPHandler) { h.AllowRemote = true }, "https://anywhere.example", http.StatusNoContent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := sidecar(t, &recorder{}, tc.configure)
			req, _ := http.NewRequest(http.MethodOptions, url, nil)
			req.Header.Set("Origin", tc.origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("preflight from %s: %d, want %d", tc.origin, resp.StatusCode, tc.status)
			}
		})
	}
}

// FuzzAllowedOrigin: an origin CheckOrigin accepts, given to
// AllowedOrigins, lets exactly that Origin in; whatever the Origin header
// holds, a sidecar with no allowed origins admits none off its own port.
func FuzzAllowedOrigin(f *testing.F) {
	for _, s := range []string{"http://localhost:6274", "https://inspector.example", "http://[::1]:80", "http://127.0.0.1:8931", "null", "http://a:b@c", "http://x/y"} {
		f.Add(s, "http://localhost:6275")
	}
	f.Fuzz(func(t *testing.T, allowed, other string) {
		preflight := func(h *proxy.HTTPHandler, origin string) int {
			req := httptest.NewRequest(http.MethodOptions, "http://127.0.0.1:8931/mcp", nil)
			req.Header.Set("Origin", origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w.Code
		}
		if other != "" && preflight(&proxy.HTTPHandler{}, other) == http.StatusNoContent {
			if u, err := url.Parse(other); err != nil || u.Port() != "8931" {
				t.Fatalf("Origin %q, not on the sidecar's own port, let into a sidecar at 127.0.0.1:8931 that allows none", other)
			}
		}
		if proxy.CheckOrigin(allowed) != nil {
			return
		}
		if code := preflight(&proxy.HTTPHandler{AllowedOrigins: []string{allowed}}, allowed); code != http.StatusNoContent {
			t.Fatalf("allowed origin %q: preflight %d", allowed, code)
		}
	})
}
