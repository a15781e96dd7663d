package otlp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discard is an exporter that sends nothing, so the benchmark measures the
// sidecar's side only.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkHook compares what the relay's path pays per tools/call (Hook:
// a non-blocking enqueue) with building and ending the span there
// (inline), in the same run.
func BenchmarkHook(b *testing.B) {
	s := &proxy.Session{ID: "s-1", Server: "files", Transport: "stdio"}
	s.SetClient("agent", "1", "2025-06-18")
	ex := &proxy.Exchange{Session: s, Direction: hindsight.ClientToServer, Method: "tools/call", ID: json.RawMessage(`7`),
		Request:  []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read","arguments":{"path":"/etc/hosts"},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`),
		Response: []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"127.0.0.1 localhost"}]}}`),
		Started:  time.Now(), Ended: time.Now()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(&countingExporter{SpanExporter: discard{}}, sdktrace.WithBlocking()))
	t := &tracer{queue: make(chan *proxy.Exchange, QueueSize), stop: make(chan struct{}), done: make(chan struct{}),
		provider: tp, tracer: tp.Tracer(instrumentation), exporter: &countingExporter{SpanExporter: discard{}},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go t.run()
	defer t.Shutdown()
	b.Run("enqueue", func(b *testing.B) {
		for b.Loop() {
			t.Hook(ex)
		}
	})
	b.Run("inline", func(b *testing.B) {
		for b.Loop() {
			t.emit(ex)
		}
	})
}
