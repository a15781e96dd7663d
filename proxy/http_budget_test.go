package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/proxy"
)

// TestHTTPBodyBudget: four agents start sending bodies that together go
// over the sidecar's budget for bodies in flight; the one whose body the
// budget took is relayed, the other three are refused with 503 and
// Retry-After at once (before their bodies are read) and counted; once the
// first is answered, its share of the budget is free again.
func TestHTTPBodyBudget(t *testing.T) {
	const budget, size = 1 << 20, 700 << 10
	up := scripted(func(w http.ResponseWriter, id string) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{}}`)
	})
	h := &proxy.HTTPHandler{Server: "rec", BodyBudget: budget}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	h.Upstream = &proxy.HTTPUpstream{URL: upSrv.URL + "/mcp", Transport: proxy.TransportStreamable}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	addr := strings.TrimPrefix(srv.URL, "http://")

	body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", size) + `"}}`
	type agent struct {
		conn net.Conn
		resp chan *http.Response
	}
	agents := make([]agent, 4)
	for i := range agents {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(time.Minute)) // a hang fails, not a slow machine
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
			addr, len(body), body[:100])
		agents[i] = agent{c, make(chan *http.Response, 1)}
		go func(a agent) {
			resp, err := http.ReadResponse(bufio.NewReader(a.conn), nil)
			if err != nil {
				close(a.resp)
				return
			}
			io.ReadAll(resp.Body)
			a.resp <- resp
		}(agents[i])
	}
	// Three answers come while every body is unfinished: refusals.
	refused := map[int]bool{}
	for len(refused) < 3 {
		select {
		case <-time.After(time.Minute):
			t.Fatalf("only %d of 4 bodies refused over a budget that takes one", len(refused))
		default:
		}
		for i, a := range agents {
			select {
			case resp, ok := <-a.resp:
				if !ok || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("agent %d: %v (ok %v); want 503 with Retry-After", i, resp, ok)
				}
				refused[i] = true
			default:
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.BodiesRefused(); n != 3 {
		t.Errorf("BodiesRefused = %d, want 3", n)
	}
	for i, a := range agents {
		if refused[i] {
			continue
		}
		io.WriteString(a.conn, body[100:])
		if resp := <-a.resp; resp == nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the body within the budget: %v", resp)
		}
	}
	// A body larger than the whole budget could never be taken: 413.
	resp := postMCP(t, srv.URL+"/mcp", "", []byte(strings.Replace(body, `"pad":"`, `"pad":"`+strings.Repeat("y", budget), 1)), nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the whole budget: %d, want 413", resp.StatusCode)
	}
	// The budget is free again (its release may trail the answer).
	for try := 0; ; try++ {
		resp := postMCP(t, srv.URL+"/mcp", "", []byte(body), nil)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if resp.StatusCode != http.StatusServiceUnavailable || try == 100 {
			t.Fatalf("after the first was answered: %d", resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
