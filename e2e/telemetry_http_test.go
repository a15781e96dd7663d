//go:build unix

package e2e

import (
	"context"
	"encoding/hex"
	"syscall"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit/otlptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSpansOverStreamableHTTP: `hindsight serve` traces the calls of a
// Streamable HTTP session: the transport attributes say tcp and http, the
// session is the one the client holds, the parent is the client's.
func TestSpansOverStreamableHTTP(t *testing.T) {
	rcv := &otlptest.Receiver{}
	base := rcv.ListenHTTP(t)
	cmd, _ := sidecar(t, "telemetry:\n  endpoint: "+base+"\n", nil, "serve", "--listen", "127.0.0.1:0", "--name", "fake")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := servedURL(stderr)
	t0 := time.Now()
	u, ok := <-url
	t.Logf("serve started in %v", time.Since(t0).Round(time.Millisecond))
	if !ok {
		t.Fatal("hindsight serve exited before serving")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "otel-http", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: u}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("connected in %v", time.Since(t0).Round(time.Millisecond))
	session := cs.ID()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"},
		Meta: mcp.Meta{"traceparent": "00-" + parentTrace + "-" + parentSpan + "-01"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	cs.Close()
	t0 = time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve exited: %v", err)
	}
	t.Logf("serve stopped in %v", time.Since(t0).Round(time.Millisecond))
	spans, _ := rcv.Received()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1: %v", len(spans), spans)
	}
	sp := spans[0]
	for k, v := range map[string]string{"network.transport": "tcp", "network.protocol.name": "http",
		"hindsight.transport": "streamable-http", "mcp.session.id": session, "gen_ai.tool.name": "echo"} {
		if got := otlptest.Attr(sp.Attributes, k); got != v || v == "" {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if hex.EncodeToString(sp.TraceId) != parentTrace || hex.EncodeToString(sp.ParentSpanId) != parentSpan {
		t.Errorf("trace %x parent %x", sp.TraceId, sp.ParentSpanId)
	}
}
