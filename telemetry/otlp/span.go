package otlp

import (
	"context"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of the semantic conventions for MCP and gen-ai, and
// Hindsight's own.
const (
	keyMethod         = attribute.Key("mcp.method.name")
	keyOperation      = attribute.Key("gen_ai.operation.name")
	keyTool           = attribute.Key("gen_ai.tool.name")
	keyRequestID      = attribute.Key("jsonrpc.request.id")
	keySession        = attribute.Key("mcp.session.id")
	keyProtocol       = attribute.Key("mcp.protocol.version")
	keyNetTransport   = attribute.Key("network.transport")
	keyNetProtocol    = attribute.Key("network.protocol.name")
	keyErrorType      = attribute.Key("error.type")
	keyStatusCode     = attribute.Key("rpc.response.status_code")
	keyServer         = attribute.Key("hindsight.server.name")
	keyTransport      = attribute.Key("hindsight.transport")
	keyLocal          = attribute.Key("hindsight.local")
	methodToolsCall   = "tools/call"
	operationExecTool = "execute_tool"
)

// protocolMetaPath finds the protocol version a request of spec
// 2026-07-28 (no initialize) carries in its _meta.
const protocolMetaPath = `params._meta.io\.modelcontextprotocol/protocolVersion`

// traced reports whether ex gets a span: a tools/call from the agent.
func traced(ex *proxy.Exchange) bool {
	return ex.Method == methodToolsCall && ex.Direction == hindsight.ClientToServer
}

// call is one span's content, read from an exchange.
type call struct {
	name    string
	attrs   []attribute.KeyValue
	errType string            // "" when the call succeeded
	parent  trace.SpanContext // the agent's span, when the request names one
}

// describe reads the span of a tools/call exchange: its name, attributes,
// error and parent. It reads the tool's name, never its arguments or
// result.
func describe(ex *proxy.Exchange) call {
	req := gjson.GetManyBytes(ex.Request, "params.name", protocolMetaPath)
	tool := req[0].String()
	c := call{name: methodToolsCall, parent: parentOf(ex.Request),
		attrs: []attribute.KeyValue{keyMethod.String(methodToolsCall), keyOperation.String(operationExecTool)}}
	if tool != "" {
		c.name += " " + tool
		c.attrs = append(c.attrs, keyTool.String(tool))
	}
	if id, ok := requestID(ex.ID); ok {
		c.attrs = append(c.attrs, keyRequestID.String(id))
	}
	protocol := req[1].String()
	if s := ex.Session; s != nil {
		c.attrs = append(c.attrs, sessionAttrs(s)...)
		if _, _, v := s.Client(); v != "" {
			protocol = v
		}
	}
	if protocol != "" {
		c.attrs = append(c.attrs, keyProtocol.String(protocol))
	}
	if ex.Local {
		c.attrs = append(c.attrs, keyLocal.Bool(true))
	}
	var code string
	c.errType, code = outcome(ex)
	if code != "" {
		c.attrs = append(c.attrs, keyStatusCode.String(code))
	}
	if c.errType != "" {
		c.attrs = append(c.attrs, keyErrorType.String(c.errType))
	}
	return c
}

// sessionAttrs are the attributes of the session a call belongs to.
func sessionAttrs(s *proxy.Session) []attribute.KeyValue {
	var a []attribute.KeyValue
	if s.ID != "" {
		a = append(a, keySession.String(s.ID))
	}
	switch s.Transport {
	case "stdio":
		a = append(a, keyNetTransport.String("pipe"))
	case "":
	default: // Streamable HTTP and SSE
		a = append(a, keyNetTransport.String("tcp"), keyNetProtocol.String("http"))
	}
	if s.Server != "" {
		a = append(a, keyServer.String(s.Server))
	}
	if s.Transport != "" {
		a = append(a, keyTransport.String(s.Transport))
	}
	return a
}

// outcome classifies how a call ended: errType is "" for a success, the
// JSON-RPC error code, "tool_error" for a result with isError,
// "cancelled" or "transport_failure"; code is the JSON-RPC error code, if
// the response carried one.
func outcome(ex *proxy.Exchange) (errType, code string) {
	switch {
	case ex.Cancelled:
		return "cancelled", ""
	case ex.Failure != "":
		return "transport_failure", ""
	}
	r := gjson.GetManyBytes(ex.Response, "error.code", "result.isError")
	if r[0].Exists() {
		code = r[0].Raw
		if r[0].Type == gjson.String {
			code = r[0].Str
		}
		return code, code
	}
	if r[1].Type == gjson.True {
		return "tool_error", ""
	}
	return "", ""
}

// requestID is the string form of a JSON-RPC id; ok is false for a null or
// missing id.
func requestID(raw []byte) (string, bool) {
	r := gjson.ParseBytes(raw)
	switch r.Type {
	case gjson.String:
		return r.Str, true
	case gjson.Number:
		return r.Raw, true
	}
	return "", false
}

// parentOf returns the span context a request names in params._meta
// (W3C traceparent, with its tracestate), marked remote, or an invalid
// one when it names none or a malformed one.
func parentOf(request []byte) trace.SpanContext {
	r := gjson.GetManyBytes(request, "params._meta.traceparent", "params._meta.tracestate")
	if r[0].Type != gjson.String {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": r[0].Str}
	if r[1].Type == gjson.String {
		carrier["tracestate"] = r[1].Str
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}
