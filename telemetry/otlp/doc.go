// Package otlp exports OpenTelemetry traces of the tool calls a sidecar
// relays, over OTLP (http/protobuf or gRPC), as a telemetry.Config and the
// environment say. It is off unless an endpoint is configured. Its
// exporters link gRPC and protobuf: only the full build (hindsightd) has
// it, and the lean one replaces itself with that build when tracing is on.
//
// It emits one span per tools/call request from the agent, named
// "tools/call {tool}", of kind SERVER (the sidecar receives the agent's
// request and answers it), timed from the request's arrival to the
// response's relay, with the attributes of the OpenTelemetry semantic
// conventions for MCP and gen-ai: mcp.method.name, gen_ai.operation.name
// ("execute_tool"), gen_ai.tool.name, jsonrpc.request.id, mcp.session.id,
// mcp.protocol.version, network.transport ("pipe" on stdio, "tcp" over
// HTTP), network.protocol.name ("http" over HTTP) and, when the call
// failed, error.type (the JSON-RPC error code, "tool_error" for a result
// with isError, "cancelled", "transport_failure") and
// rpc.response.status_code (the JSON-RPC error code). Hindsight adds
// hindsight.server.name, hindsight.transport and hindsight.local (the
// sidecar answered the call itself). Arguments, results and error messages
// are never exported: they may hold secrets.
//
// A W3C traceparent (and tracestate) in the request's params._meta makes
// the span a child of the agent's span; the relayed bytes are never
// changed.
//
// Nothing but a non-blocking enqueue runs on the relay's path: spans are
// built by a worker and exported in batches. A full queue drops the call's
// span; drops and failed exports are counted, logged once, and summed up
// when the sidecar stops.
package otlp
