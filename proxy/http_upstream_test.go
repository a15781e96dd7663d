package proxy_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// steps collects what a sidecar records: every exchange handed to
// Hooks.Exchange. (capture builds a step from each; a step failed when its
// response is a JSON-RPC error or the exchange has a Failure: see
// capture.BuildStep. The capture package is not imported here: its start
// would slow every fake server this test binary runs.)
type steps struct {
	t    *testing.T
	mu   sync.Mutex
	list []*proxy.Exchange
}

func newSteps(t *testing.T) *steps { return &steps{t: t} }

func (s *steps) hooks() *proxy.Hooks {
	return &proxy.Hooks{Exchange: func(ex *proxy.Exchange) {
		s.mu.Lock()
		s.list = append(s.list, ex)
		s.mu.Unlock()
	}}
}

// only returns the one exchange recorded for method.
func (s *steps) only(method string) *proxy.Exchange {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []*proxy.Exchange
	for _, ex := range s.list {
		if ex.Method == method {
			found = append(found, ex)
		}
	}
	if len(found) != 1 {
		s.t.Fatalf("%d exchanges recorded for %s, want 1", len(found), method)
	}
	return found[0]
}

// failed reports whether ex makes a failed step.
func failed(ex *proxy.Exchange) bool {
	return ex.Failure != "" || gjson.GetBytes(ex.Response, "error").IsObject() || gjson.GetBytes(ex.Response, "result.isError").Bool()
}

// scripted is an upstream that answers initialize itself and every other
// request with answer(id).
func scripted(answer func(w http.ResponseWriter, id string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := gjson.GetBytes(body, "id")
		switch {
		case r.Method != http.MethodPost:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case gjson.GetBytes(body, "method").Str == "initialize":
			w.Header().Set("Mcp-Session-Id", "up-1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+id.Raw+`,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
		case !id.Exists():
			w.WriteHeader(http.StatusAccepted)
		default:
			answer(w, id.Raw)
		}
	}
}

// TestHTTPUpstreamJSONRPCErrorRelayed checks that an upstream's error
// status with a JSON-RPC body (the 2026-07-28 revision answers protocol
// errors so) reaches the agent as it came, status, headers and body, and
// is recorded as a failed step; with an id or without one.
func TestHTTPUpstreamJSONRPCErrorRelayed(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict} {
		for _, withID := range []bool{true, false} {
			t.Run(strconv.Itoa(status)+"/id="+strconv.FormatBool(withID), func(t *testing.T) {
				var body string
				up := scripted(func(w http.ResponseWriter, id string) {
					if !withID {
						id = "null"
					}
					body = `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32020,"message":"Mcp-Method header does not match the body","data":{"supported":["2026-07-28"]}}}`
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("X-Upstream", "kept")
					w.WriteHeader(status)
					io.WriteString(w, body)
				})
				rec := newSteps(t)
				url := sidecar(t, up, func(h *proxy.HTTPHandler) { h.Hooks = rec.hooks() })
				sid := initialize(t, url, nil)
				resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"x"}}`), nil)
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != status || string(got) != body || resp.Header.Get("X-Upstream") != "kept" {
					t.Fatalf("agent got %d %s (X-Upstream %q)\nwant %d %s", resp.StatusCode, got, resp.Header.Get("X-Upstream"), status, body)
				}
				ex := rec.only("tools/call")
				if !failed(ex) || string(ex.Response) != body {
					t.Errorf("recorded response %s (failure %q), want the upstream's error as a failure", ex.Response, ex.Failure)
				}
				if status == http.StatusNotFound { // the upstream forgot the session: so does the sidecar
					r := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`), nil)
					r.Body.Close()
					if r.StatusCode != http.StatusNotFound {
						t.Errorf("after the upstream's 404: ping got %d, want 404", r.StatusCode)
					}
				}
			})
		}
	}
}

// TestHTTPUpstreamNonsense checks that an answer the agent could not use
// (an error status without JSON-RPC, an HTML page, an empty body, an
// answer to another id) becomes a JSON-RPC error for the agent's request that names the
// upstream, recorded as a failed step.
func TestHTTPUpstreamNonsense(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, id string)
		says   string
	}{
		{"502", func(w http.ResponseWriter, id string) {
			http.Error(w, "the backend is down", http.StatusBadGateway)
		}, "upstream HTTP 502: the backend is down"},
		{"html", func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body>Welcome to nginx!</body></html>")
		}, "upstream answered text/html, not JSON-RPC"},
		{"empty", func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "application/json")
		}, `upstream answered application/json, not JSON-RPC: ""`},
		{"wrong id", func(w http.ResponseWriter, id string) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":"nobody-asked","result":{"content":[]}}`)
		}, `not its response (id "nobody-asked")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(scripted(tc.answer))
			defer up.Close()
			rec := newSteps(t)
			h := &proxy.HTTPHandler{Upstream: &proxy.HTTPUpstream{URL: up.URL + "/mcp", Transport: proxy.TransportStreamable},
				Server: "s", Hooks: rec.hooks(), Logger: quietLogger()}
			srv := httptest.NewServer(h)
			defer func() { h.Close(); srv.Close() }()
			url := srv.URL + "/mcp"
			sid := initialize(t, url, nil)
			resp := postMCP(t, url, sid, []byte(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"x"}}`), nil)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			msg := gjson.GetBytes(got, "error.message").Str
			if resp.StatusCode != http.StatusOK || gjson.GetBytes(got, "id").Raw != `"call-1"` ||
				!strings.Contains(msg, tc.says) || !strings.Contains(msg, up.URL+"/mcp") {
				t.Fatalf("agent got %d %s\nwant a JSON-RPC error for call-1 saying %q and naming %s", resp.StatusCode, got, tc.says, up.URL+"/mcp")
			}
			if ex := rec.only("tools/call"); !failed(ex) || ex.Failure == "" || string(ex.Response) != string(got) {
				t.Errorf("recorded %s (failure %q), want the error the agent got, as a failure", ex.Response, ex.Failure)
			}
		})
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestHTTPUpstreamErrorLegacyAgent checks that an agent of the legacy SSE
// transport, which gets no HTTP status, is answered for its own request
// when the upstream's error names none (id null): the go-sdk client
// connects (its server/discover refused, it initializes) and its ping
// gets the upstream's error.
func TestHTTPUpstreamErrorLegacyAgent(t *testing.T) {
	up := scripted(func(w http.ResponseWriter, id string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`)
	})
	url := sidecar(t, up, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
		&mcp.SSEClientTransport{Endpoint: strings.TrimSuffix(url, "/mcp") + "/sse"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	err = cs.Ping(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "upstream HTTP 400: Bad Request: Server not initialized") {
		t.Fatalf("ping: %v; want the upstream's error", err)
	}
}
