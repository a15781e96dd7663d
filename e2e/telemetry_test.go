package e2e

// A real sidecar (`hindsight wrap`, built from this module) in front of a
// real MCP server (the scripted fakeserver, re-executed from this test
// binary) exports its spans to an OTLP receiver in this process. The lean
// hindsight carries no OTLP exporter: with tracing on it replaces itself
// with hindsightd, built beside it, which exports.

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/fakeserver"
	"github.com/hindsight-proxy/hindsight/lab/testkit/otlptest"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/hindsight-proxy/hindsight/telemetry/otlp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func TestTelemetryFakeServer(t *testing.T) { fakeserver.Main() }

// agent speaks JSON-RPC lines to a sidecar.
type agent struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// sidecar returns the command `hindsight ARGS… -- fakeserver` in a fresh
// home holding config, with env added to an environment cleared of OTEL_*.
func sidecar(t *testing.T, config string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	bin := testbin.HindsightFull(t)
	home := testbin.HomeWith(t, config)
	args = append(append(args, "--", os.Args[0]), fakeserver.Args("TestTelemetryFakeServer")...)
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HINDSIGHT_HOME="+home)
	cmd.Env = append(cmd.Env, fakeserver.Vars(fakeserver.ModeMCP, "", "")...)
	cmd.Env = append(cmd.Env, env...)
	return cmd, home
}

// wrap starts `hindsight wrap` in front of the fake server (see sidecar)
// and initializes a session.
func wrap(t *testing.T, config string, env ...string) (*agent, string) {
	t.Helper()
	cmd, home := sidecar(t, config, env, "wrap", "--name", "fake")
	return start(t, cmd), home
}

// start starts cmd, a sidecar (see sidecar), and initializes a session.
func start(t *testing.T, cmd *exec.Cmd) *agent {
	t.Helper()
	in, out := testkit.StartPiped(t, cmd)
	a := &agent{t: t, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	a.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"otel-test","version":"1"}}}`)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return a
}

func (a *agent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		a.t.Fatal(err)
	}
}

// call sends a request and returns its response (notifications skipped).
func (a *agent) call(line string) map[string]json.RawMessage {
	a.t.Helper()
	var req struct{ ID json.RawMessage }
	if err := json.Unmarshal([]byte(line), &req); err != nil {
		a.t.Fatal(err)
	}
	a.send(line)
	for {
		l, err := a.out.ReadBytes('\n')
		if err != nil {
			a.t.Fatalf("read the response to %s: %v", req.ID, err)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(l, &m) == nil && string(m["id"]) == string(req.ID) {
			return m
		}
	}
}

// stop closes the sidecar's stdin, as an agent that quits does, and waits
// for it to exit; a sidecar that has not exited after two minutes fails
// the test (a hang guard: the sidecar normally exits within seconds).
func (a *agent) stop() {
	a.t.Helper()
	a.in.Close()
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			a.t.Errorf("sidecar exited: %v", err)
		}
	case <-time.After(2 * time.Minute):
		a.t.Fatal("the sidecar did not exit within two minutes of its agent leaving")
	}
}

const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

// TestSpansOfToolCalls: one span per tools/call, with the semantic
// conventions' attributes, an error type for each failure, and the
// agent's traceparent as parent; nothing for other methods; no argument
// or result in any attribute.
func TestSpansOfToolCalls(t *testing.T) {
	rcv := &otlptest.Receiver{}
	base := rcv.ListenHTTP(t)
	a, _ := wrap(t, "inject:\n  instructions: false\n  error_results: false\n  query_tool: false\n"+
		"telemetry:\n  endpoint: "+base+"\n  service_name: otel-e2e\n")
	if r := a.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"s3cret-argument"}}}`); r["result"] == nil {
		t.Fatalf("echo: %s", r["error"])
	}
	a.call(`{"jsonrpc":"2.0","id":"call-2","method":"tools/call","params":{"name":"fail"}}`)
	if r := a.call(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nosuch"}}`); r["error"] == nil {
		t.Fatal("nosuch: no JSON-RPC error")
	}
	a.call(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	a.call(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"traceparent":"00-` + parentTrace + `-` + parentSpan + `-01","tracestate":"rojo=1"}}}`)
	a.stop() // flushes

	spans, services := rcv.Received()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4 (one per tools/call): %v", len(spans), spans)
	}
	byID := map[string]*tracepb.Span{}
	for i, sp := range spans {
		byID[otlptest.Attr(sp.Attributes, "jsonrpc.request.id")] = sp
		if services[i] != "otel-e2e" {
			t.Errorf("service.name %q", services[i])
		}
		if sp.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("%s: kind %v", sp.Name, sp.Kind)
		}
		if sp.StartTimeUnixNano == 0 || sp.EndTimeUnixNano < sp.StartTimeUnixNano {
			t.Errorf("%s: times %d → %d", sp.Name, sp.StartTimeUnixNano, sp.EndTimeUnixNano)
		}
		for _, kv := range sp.Attributes {
			if strings.Contains(kv.Value.String(), "s3cret") {
				t.Errorf("%s: attribute %s carries the argument", sp.Name, kv.Key)
			}
		}
		for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
			"mcp.protocol.version": "2025-06-18", "network.transport": "pipe", "hindsight.server.name": "fake", "hindsight.transport": "stdio"} {
			if got := otlptest.Attr(sp.Attributes, k); got != v {
				t.Errorf("%s: %s = %q, want %q", sp.Name, k, got, v)
			}
		}
		if otlptest.Attr(sp.Attributes, "mcp.session.id") == "" {
			t.Errorf("%s: no mcp.session.id", sp.Name)
		}
	}
	for id, want := range map[string]struct{ name, errType, code string }{
		"1": {"tools/call echo", "", ""}, "call-2": {"tools/call fail", "tool_error", ""},
		"3": {"tools/call nosuch", "-32602", "-32602"}, "5": {"tools/call echo", "", ""},
	} {
		sp := byID[id]
		if sp == nil {
			t.Errorf("no span for request %s", id)
			continue
		}
		if sp.Name != want.name || otlptest.Attr(sp.Attributes, "gen_ai.tool.name") != strings.TrimPrefix(want.name, "tools/call ") {
			t.Errorf("request %s: span %q", id, sp.Name)
		}
		if got := otlptest.Attr(sp.Attributes, "error.type"); got != want.errType {
			t.Errorf("request %s: error.type %q, want %q", id, got, want.errType)
		}
		if got := otlptest.Attr(sp.Attributes, "rpc.response.status_code"); got != want.code {
			t.Errorf("request %s: rpc.response.status_code %q, want %q", id, got, want.code)
		}
		if failed := sp.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR; failed != (want.errType != "") {
			t.Errorf("request %s: status %v", id, sp.Status)
		}
	}
	if sp := byID["5"]; sp != nil {
		if hex.EncodeToString(sp.TraceId) != parentTrace || hex.EncodeToString(sp.ParentSpanId) != parentSpan || sp.TraceState != "rojo=1" {
			t.Errorf("traced call: trace %x parent %x state %q, want %s / %s", sp.TraceId, sp.ParentSpanId, sp.TraceState, parentTrace, parentSpan)
		}
	}
	if sp := byID["1"]; sp != nil && (hex.EncodeToString(sp.TraceId) == parentTrace || len(sp.ParentSpanId) != 0) {
		t.Errorf("untraced call has a parent: trace %x parent %x", sp.TraceId, sp.ParentSpanId)
	}
}

// TestSpansOverGRPC: the environment alone (endpoint and protocol) turns
// tracing on, over gRPC.
func TestSpansOverGRPC(t *testing.T) {
	rcv := &otlptest.Receiver{}
	url := rcv.ListenGRPC(t)
	a, _ := wrap(t, "", "OTEL_EXPORTER_OTLP_ENDPOINT="+url, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_SERVICE_NAME=from-env")
	a.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	a.stop()
	spans, services := rcv.Received()
	if len(spans) != 1 || spans[0].Name != "tools/call echo" || services[0] != "from-env" {
		t.Fatalf("spans %v, services %v", spans, services)
	}
}

// TestCollectorDown: a collector that refuses connections, or accepts
// them and never answers, with an export timeout of ten minutes, costs the
// agent nothing: every call succeeds, and the sidecar still exits when the
// agent leaves (its flush is bounded), logging export failures at most
// once and, at exit, every call's span as exported or lost.
func TestCollectorDown(t *testing.T) {
	for _, silent := range []bool{false, true} {
		t.Run(map[bool]string{false: "refused", true: "silent"}[silent], func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			if silent {
				go hold(ln)
				t.Cleanup(func() { ln.Close() })
			} else {
				ln.Close()
			}
			collectorDown(t, addr, silent)
		})
	}
}

// hold accepts connections on ln and never answers them.
func hold(ln net.Listener) {
	var held []net.Conn // kept, so that no finalizer closes them
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		held = append(held, c)
	}
}

// lostLine is the sidecar's log line that sums up lost spans at exit.
type lostLine struct {
	Msg          string
	Exported     int64
	ExportFailed int64 `json:"export_failed"`
	QueueFull    int64 `json:"queue_full"`
	UnsentAtExit int64 `json:"unsent_at_exit"`
}

// collectorDown makes calls through a sidecar whose collector at addr is
// down. A silent collector holds the exports, so the sidecar's queues fill
// (the batch processor's is cut to 64): the calls past them must still be
// answered, their spans dropped and counted.
func collectorDown(t *testing.T, addr string, silent bool) {
	a, home := wrap(t, "telemetry:\n  endpoint: http://"+addr+"\n",
		"OTEL_EXPORTER_OTLP_TIMEOUT=600000", "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=8", "OTEL_BSP_MAX_QUEUE_SIZE=64")
	calls := 200
	if silent {
		calls = otlp.QueueSize + 1000
	}
	for i := range calls {
		r := a.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"n%d"}}}`, i+1, i))
		if r["result"] == nil || !strings.Contains(string(r["result"]), fmt.Sprintf(`"n%d"`, i)) {
			t.Fatalf("call %d: %s", i, r["error"])
		}
	}
	a.stop()
	log, err := os.ReadFile(filepath.Join(home, "logs", "wrap-fake.log"))
	if err != nil {
		t.Fatal(err)
	}
	var lost *lostLine
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "spans lost") || strings.Contains(l, "export traces") || strings.Contains(l, "sidecar closed") {
			t.Log(l)
		}
		var rec lostLine
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "spans lost" {
			lost = &rec
		}
	}
	if lost == nil {
		t.Fatal("the log does not sum up the lost spans")
	}
	if sum := lost.Exported + lost.ExportFailed + lost.QueueFull + lost.UnsentAtExit; sum != int64(calls) || lost.Exported != 0 {
		t.Errorf("spans lost %+v: sum %d, want %d calls, none exported", *lost, sum, calls)
	}
	if silent && lost.QueueFull == 0 {
		t.Errorf("spans lost %+v: none dropped by a full queue", *lost)
	}
	if n := strings.Count(string(log), "export traces (further failures"); n > 1 {
		t.Errorf("export failure logged %d times, want at most once", n)
	}
}

// TestTracingWithoutFullBuild: a lean sidecar with tracing on and no
// hindsightd beside it or on PATH relays every call, exports nothing, and
// says in its log why.
func TestTracingWithoutFullBuild(t *testing.T) {
	rcv := &otlptest.Receiver{}
	base := rcv.ListenHTTP(t)
	lean, err := os.ReadFile(testbin.Hindsight(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	alone := filepath.Join(dir, filepath.Base(testbin.Hindsight(t)))
	if err := os.WriteFile(alone, lean, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd, home := sidecar(t, "telemetry:\n  endpoint: "+base+"\n", []string{"PATH=" + dir}, "wrap", "--name", "fake")
	cmd.Path, cmd.Args[0] = alone, alone
	a := start(t, cmd)
	if r := a.call(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`); r["result"] == nil {
		t.Fatalf("echo: %s", r["error"])
	}
	a.stop()
	if spans, _ := rcv.Received(); len(spans) != 0 {
		t.Errorf("%d spans exported by a build without an exporter", len(spans))
	}
	log, err := os.ReadFile(filepath.Join(home, "logs", "wrap-fake.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "tracing is off") || !strings.Contains(string(log), "hindsightd") {
		t.Errorf("the log does not say why tracing is off:\n%s", log)
	}
}
