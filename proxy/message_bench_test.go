package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

var benchRequest = []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` +
	strings.Repeat("abcdefgh ", 28) + `"},"_meta":{"progressToken":"t-1"}}}`)

var benchResponse = []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` +
	strings.Repeat("abcdefgh ", 28) + `"}],"isError":false}}`)

// BenchmarkParse compares Parse with the floor of any full validation,
// encoding/json.Valid, on a typical 300-byte request.
func BenchmarkParse(b *testing.B) {
	b.Run("Parse", func(b *testing.B) {
		b.SetBytes(int64(len(benchRequest)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(benchRequest); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(benchRequest)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(benchRequest) {
				b.Fatal("invalid")
			}
		}
	})
}

// BenchmarkConnExchange is the proxy core's work for one tools/call and its
// response: classify both, track, match, emit.
func BenchmarkConnExchange(b *testing.B) {
	c := &Conn{Session: &Session{ID: "b", Server: "echo", Transport: "stdio"}, Logger: slog.New(slog.DiscardHandler),
		Hooks: &Hooks{Exchange: func(*Exchange) {}}}
	b.SetBytes(int64(len(benchRequest) + len(benchResponse)))
	b.ReportAllocs()
	for b.Loop() {
		c.FromClient(benchRequest)
		c.FromServer(benchResponse)
	}
}

// BenchmarkConnHooks is BenchmarkConnExchange with the hooks a sidecar with
// the injector installs: a ToolCall that forwards, a ToolResult that looks
// for "isError" and keeps the result (as the injector does for successes),
// and an Exchange hook.
func BenchmarkConnHooks(b *testing.B) {
	c := &Conn{Session: &Session{ID: "b", Server: "echo", Transport: "stdio"}, Logger: slog.New(slog.DiscardHandler),
		Hooks: &Hooks{
			ToolCall: func(*Session, string, json.RawMessage) LocalHandler { return nil },
			ToolResult: func(_ context.Context, _ *Exchange, r json.RawMessage) json.RawMessage {
				if bytes.Contains(r, []byte(`"isError":true`)) {
					return r
				}
				return nil
			},
			Exchange: func(*Exchange) {},
		}}
	b.SetBytes(int64(len(benchRequest) + len(benchResponse)))
	b.ReportAllocs()
	for b.Loop() {
		c.FromClient(benchRequest)
		c.FromServer(benchResponse)
	}
}
