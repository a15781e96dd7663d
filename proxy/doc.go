// Package proxy relays MCP traffic between an agent and one MCP server,
// transparently, and exposes what passes through it at a few interception
// points (Hooks).
//
// The relay works on raw bytes: a message is parsed only as far as its
// kind, id and method, and is passed on byte for byte unless a hook rewrites
// the result of a response (the rest of the message is kept as it came).
// Input that is not JSON-RPC gets a JSON-RPC error for its id where one can
// be read, and is logged, never passed to a hook.
//
// Three layers, from the inside out:
//
//   - Conn is one session's state machine, free of any transport: it keeps
//     the requests in flight in both directions, runs Hooks in their
//     documented order and hands every finished request/response pair to
//     Hooks.Exchange.
//   - Transports feed a Conn: Stdio runs the server as a child process and
//     relays newline-delimited JSON-RPC (restarting a crashed child and
//     replaying the handshake to it); HTTPHandler serves Streamable HTTP at
//     /mcp and legacy HTTP+SSE at /sse to agents.
//   - Upstreams are what an HTTPHandler talks to: an HTTP server over
//     Streamable HTTP or legacy SSE (HTTPUpstream), or a command run once
//     per session (CommandUpstream).
//
// Nothing here records, stores or learns: the capture and inject packages
// implement Hooks, and the command line assembles them.
package proxy
