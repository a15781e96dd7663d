package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []sseEvent
	}{
		{"plain", "data: {\"a\":1}\n\n", []sseEvent{{Data: []byte(`{"a":1}`)}}},
		{"crlf, type and id", "event: endpoint\r\nid: 7\r\ndata: /message?x=1\r\n\r\n", []sseEvent{{Event: "endpoint", ID: "7", Data: []byte("/message?x=1")}}},
		{"multi-line data", "data: a\ndata: b\n\n", []sseEvent{{Data: []byte("a\nb")}}},
		{"no space after colon", "data:x\n\n", []sseEvent{{Data: []byte("x")}}},
		{"priming event kept, comments skipped", ": ping\n\nid: 1\ndata: \n\ndata: y\n\n", []sseEvent{{ID: "1", HasData: true}, {Data: []byte("y")}}},
		{"retry kept, unknown fields ignored", "retry: 100\nfoo: bar\ndata: z\n\n", []sseEvent{{Retry: "100", Data: []byte("z")}}},
		{"bare retry kept, bad retry and empty data dropped", "retry: 3000\n\nretry: x\ndata:\n\nfoo: 1\n\n", []sseEvent{{Retry: "3000"}}},
		{"unterminated last event dropped", "data: a\n\ndata: b", []sseEvent{{Data: []byte("a")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newSSEReader(strings.NewReader(tc.in), 0)
			var got []sseEvent
			for {
				ev, err := r.Next()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatal(err)
					}
					break
				}
				got = append(got, ev)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tc.want))
			}
			for i, g := range got {
				w := tc.want[i]
				if g.Event != w.Event || g.ID != w.ID || g.Retry != w.Retry || !bytes.Equal(g.Data, w.Data) || (w.HasData && !g.HasData) {
					t.Errorf("event %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestSSEReaderLimit(t *testing.T) {
	r := newSSEReader(strings.NewReader("data: "+strings.Repeat("x", 200<<10)+"\n\n"), 100<<10)
	if _, err := r.Next(); !errors.Is(err, errTooLarge) {
		t.Fatalf("err %v, want errTooLarge", err)
	}
	big := strings.Repeat("y", 3<<20) // longer than the bufio buffer
	r = newSSEReader(strings.NewReader("data: "+big+"\n\n"), 0)
	ev, err := r.Next()
	if err != nil || string(ev.Data) != big {
		t.Fatalf("large event: %v, %d bytes", err, len(ev.Data))
	}
}

// FuzzSSE checks that what appendEvent writes reads back unchanged (id,
// retry, event and data), and that no input makes the reader panic.
func FuzzSSE(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), "message", "", uint16(0))
	f.Add([]byte("line one\nline two\n"), "", "17", uint16(3000))
	f.Add([]byte("data: nested\n\n: x"), "endpoint", "a-b", uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, event, id string, retry uint16) {
		// Reading arbitrary bytes must not panic.
		r := newSSEReader(bytes.NewReader(data), 1<<20)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
		if len(data) == 0 || bytes.ContainsRune(data, '\r') || strings.ContainsAny(event+id, "\r\n\x00") ||
			strings.HasPrefix(id, " ") || strings.HasPrefix(event, " ") {
			return // not representable: SSE treats CR as a line end; empty data is not dispatched
		}
		in := sseEvent{Event: event, ID: id, Data: data, HasData: true}
		if retry > 0 {
			in.Retry = strconv.Itoa(int(retry))
		}
		out := appendEvent(nil, &in)
		r = newSSEReader(bytes.NewReader(out), 0)
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("read back %q: %v", out, err)
		}
		if !bytes.Equal(ev.Data, data) || ev.Event != event || ev.ID != id || ev.Retry != in.Retry {
			t.Fatalf("round trip of %+v: got %+v", in, ev)
		}
	})
}

// FuzzIsJSONRPC checks that the test for an upstream's JSON-RPC body never
// panics and never accepts what is not JSON.
func FuzzIsJSONRPC(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"result":{}}]`))
	f.Add([]byte(`<html><body>Bad Gateway</body></html>`))
	f.Add([]byte(`{"jsonrpc":"2.0"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if isJSONRPC(b) && !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
	})
}

func TestIsJSONRPC(t *testing.T) {
	for in, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`:   true,
		` {"jsonrpc":"2.0","id":null,"error":{"code":-32020,"message":"x"}}`: true,
		`[{"jsonrpc":"2.0","id":1,"result":{}}]`:                             true,
		`{"jsonrpc":"2.0","method":"notifications/message"}`:                 true,
		`<html><body>Bad Gateway</body></html>`:                              false,
		`{"jsonrpc":"2.0"}`:                                                  false,
		`{"error":"not found"}`:                                              false,
		`{"jsonrpc":"2.0","id":1,"result":{}`:                                false,
		``:                                                                   false,
	} {
		if got := isJSONRPC([]byte(in)); got != want {
			t.Errorf("isJSONRPC(%s) = %v, want %v", in, got, want)
		}
	}
}
