package weaviate

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// refusedURL returns the URL of a loopback port whose listener is closed:
// dials to it are refused.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// echo is a live node: it answers each request with its name and the body
// it received, and counts them.
func echo(t *testing.T, name string, n *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, name+":"+r.URL.Path+":"+string(b))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func failoverClient(t *testing.T, urls ...string) (*http.Client, *failover) {
	t.Helper()
	f, err := newFailover(nil, urls, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: f}, f
}

func do(t *testing.T, c *http.Client, req *http.Request) string {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestFailoverTransport(t *testing.T) {
	var hits atomic.Int64
	live := echo(t, "live", &hits)
	dead := refusedURL(t)
	c, f := failoverClient(t, dead, live.URL)

	// The client builds its URLs on the preferred node; the transport
	// rewrites them.
	body := strings.Repeat("a whole body ", 10_000)
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, dead+"/v1/objects", strings.NewReader(body))
		if got, want := do(t, c, req), "live:/v1/objects:"+body; got != want {
			t.Fatalf("request %d: got %d bytes (%.40q…), want the live node's echo of the whole body (%d bytes)", i, len(got), got, len(want))
		}
	}
	if got := f.switches.Load(); got != 1 {
		t.Errorf("switches = %d, want 1 (later requests go straight to the live node)", got)
	}
	if got := hits.Load(); got != 3 {
		t.Errorf("live node got %d requests, want 3", got)
	}

	// After preferredAgain the preferred node is tried first again; while
	// it still refuses, the request fails over once more.
	clock := time.Now()
	f.now = func() time.Time { return clock }
	f.left = clock
	clock = clock.Add(preferredAgain)
	req, _ := http.NewRequest(http.MethodGet, dead+"/v1/meta", nil)
	if got := do(t, c, req); got != "live:/v1/meta:" {
		t.Fatalf("got %q", got)
	}
	if got := f.switches.Load(); got != 2 {
		t.Errorf("switches = %d, want 2 (the preferred node was tried again)", got)
	}
}

func TestFailoverBackToPreferred(t *testing.T) {
	var first, second atomic.Int64
	a, b := echo(t, "a", &first), echo(t, "b", &second)
	c, f := failoverClient(t, a.URL, b.URL)
	clock := time.Now()
	f.now = func() time.Time { return clock }
	f.failed(0, nil) // as if a had refused a dial
	req, _ := http.NewRequest(http.MethodGet, a.URL+"/x", nil)
	if got := do(t, c, req); got != "b:/x:" {
		t.Fatalf("after leaving the preferred node: got %q, want b's answer", got)
	}
	clock = clock.Add(preferredAgain)
	req, _ = http.NewRequest(http.MethodGet, a.URL+"/x", nil)
	if got := do(t, c, req); got != "a:/x:" {
		t.Fatalf("%v later: got %q, want the preferred node's answer", preferredAgain, got)
	}
}

// TestFailoverNoResend: a request that reached a node and failed there,
// and one whose body cannot be read again, are not sent to another node.
func TestFailoverNoResend(t *testing.T) {
	var hits atomic.Int64
	live := echo(t, "live", &hits)
	abort := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler) // the connection is cut after the request was read
	}))
	t.Cleanup(abort.Close)
	c, f := failoverClient(t, abort.URL, live.URL)
	req, _ := http.NewRequest(http.MethodPost, abort.URL+"/v1/batch/objects", strings.NewReader("{}"))
	if _, err := c.Do(req); err == nil {
		t.Fatal("a request cut by the node it reached succeeded")
	}
	if hits.Load() != 0 || f.switches.Load() != 0 {
		t.Fatalf("a request that reached a node was resent: live got %d, switches %d", hits.Load(), f.switches.Load())
	}

	dead := refusedURL(t)
	c, f = failoverClient(t, dead, live.URL)
	req, _ = http.NewRequest(http.MethodPost, dead+"/v1/objects", io.NopCloser(bytes.NewReader([]byte("once"))))
	if req.GetBody != nil {
		t.Fatal("the test request has GetBody")
	}
	_, err := c.Do(req)
	if err == nil || !dialError(err) {
		t.Fatalf("a body that cannot be read again: err %v, want the dial error", err)
	}
	if hits.Load() != 0 {
		t.Fatal("a body that cannot be read again was resent")
	}
}

func TestFailoverBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://h:1", "http://"} {
		if _, err := newFailover(nil, []string{"http://127.0.0.1:1", u}, slog.Default()); err == nil {
			t.Errorf("URL %q accepted", u)
		}
	}
}
