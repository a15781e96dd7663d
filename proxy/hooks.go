package proxy

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// Hooks are the proxy's interception points. Every field is optional; a nil
// hook leaves the traffic it would see unchanged.
//
// For each message the proxy first parses and validates it (malformed input
// is answered or logged, never passed to a hook), then runs the hooks in
// this order:
//
//   - agent → server request tools/call: ToolCall decides whether the
//     sidecar answers it itself; otherwise it is forwarded unchanged.
//   - server → agent response to initialize or server/discover: Initialize.
//   - server → agent response to tools/list: ToolsList.
//   - server → agent response to tools/call: ToolResult.
//   - the requests of the agent whose answers are about to be written to
//     the agent, before they are: Record (on stdio those of a burst of the
//     server's messages, on HTTP each one as it is relayed).
//   - every completed request/response pair, in either direction, after the
//     response was relayed: Exchange.
//
// Hooks that rewrite a result receive the raw JSON of the "result" member and
// return its replacement, or nil to keep it; the rest of the message (id,
// _meta, unknown members) is kept byte for byte. A replacement that is not
// valid JSON, or a hook that panics, leaves the result unchanged (and is
// logged); line breaks in a replacement are compacted away, since a line
// break ends a message on stdio. The result a hook receives is part of the
// message being relayed: it must not be modified, nor kept after the hook
// returns (copy what is needed).
//
// A hook that needs the network should bound itself by ctx, which carries
// Conn.HookTimeout as its deadline, counted from the response's arrival at
// the sidecar (the read that brought it): the response it holds back, and
// those that arrived with it, wait for it. ctx is cancelled when the hook returns, so it must not be kept either.
// Its deadline timer is armed only when something calls ctx.Done (a select,
// a derived context, a network call): a hook that never waits costs no
// timer, and ctx.Err reports an expired deadline either way.
type Hooks struct {
	// Initialize rewrites the result of initialize (spec 2025-11-25) or
	// server/discover (spec 2026-07-28).
	Initialize func(ctx context.Context, s *Session, result json.RawMessage) json.RawMessage

	// ToolsList rewrites the result of tools/list.
	ToolsList func(ctx context.Context, s *Session, result json.RawMessage) json.RawMessage

	// ToolCall is consulted for every tools/call request before it is
	// forwarded. It returns nil to forward the call, or a LocalHandler that
	// produces the result itself; the call then never reaches the server.
	// ToolCall runs on the read loop and must not block; the LocalHandler
	// runs on its own goroutine. params is part of the request as relayed:
	// it may be kept, but never modified.
	ToolCall func(s *Session, name string, params json.RawMessage) LocalHandler

	// ToolResult rewrites the result of a forwarded tools/call. It may
	// record what it added in ex.Injected.
	ToolResult func(ctx context.Context, ex *Exchange, result json.RawMessage) json.RawMessage

	// Exchange is called once for every request that completed, failed or
	// was cancelled, with the bytes as relayed. It is called on the relay's
	// path and must return at once (queue the work). On stdio it runs once
	// the response was written to the agent, so the agent never waits for
	// it; the next messages from the server do.
	Exchange func(ex *Exchange)

	// Record is called with the agent's requests that answers about to be
	// written to the agent complete (on stdio those of one burst of the
	// server's messages; on HTTP the one each response or error relayed
	// completes; a local answer; the errors sent for a server that
	// exited), before they are written: a recorder that must survive
	// the process being killed the moment the agent has its answer makes
	// its record here, and marks each exchange it recorded (Recorded). It
	// runs on the relay's path, on HTTP on each request's goroutine (so
	// concurrently): the answers wait for it. Exchange still sees every
	// exchange afterwards.
	Record func(exs []*Exchange)
}

// LocalHandler answers a request in the sidecar. It returns the JSON-RPC
// result, or an error that is sent as a JSON-RPC error. A handler that
// panics or returns something that is not JSON gets an internal error
// instead. ctx is cancelled when the agent cancels the request; the
// handler's answer is then dropped.
type LocalHandler func(ctx context.Context) (result json.RawMessage, err error)

// Session describes one agent ↔ server conversation through the sidecar.
type Session struct {
	ID        string // sidecar-assigned for stdio, Mcp-Session-Id for HTTP
	Server    string // the --name of the wrapped server
	Transport string // "stdio", "streamable-http" or "sse"
	HostPID   int    // the agent host process of a stdio sidecar; 0 otherwise
	TaskID    string // explicit task id from HINDSIGHT_TASK_ID, if any

	mu              sync.Mutex
	clientName      string
	clientVersion   string
	protocolVersion string
}

// Client returns the client's name, version and protocol version, as sent
// in initialize (or server/discover).
func (s *Session) Client() (name, version, protocol string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clientName, s.clientVersion, s.protocolVersion
}

// SetClient records the client's identity.
func (s *Session) SetClient(name, version, protocol string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name != "" {
		s.clientName = name
	}
	if version != "" {
		s.clientVersion = version
	}
	if protocol != "" {
		s.protocolVersion = protocol
	}
}

// Exchange is one request and its outcome, as relayed.
type Exchange struct {
	Session   *Session
	Direction hindsight.Direction
	Method    string
	ID        json.RawMessage
	Request   []byte // the request as relayed; shared, never modify
	Response  []byte // the response as relayed; nil when there was none
	Started   time.Time
	Ended     time.Time

	// Notifications counts notifications tied to the request (progress
	// notifications carrying its progress token).
	Notifications int
	// Cancelled is set when the requester sent notifications/cancelled.
	Cancelled bool
	// Local is set when the sidecar answered the request itself.
	Local bool
	// Failure describes a transport failure that ended the request without
	// an answer from its peer (the child exited, the upstream failed).
	Failure string
	// Injected lists what hooks added to the response.
	Injected []hindsight.Injection
	// Recorded is set by the Record hook for an exchange it recorded.
	Recorded bool
	// Owed is set by the Record hook for an exchange it left to Exchange
	// and counted in its crash-proof ledger instead.
	Owed bool

	progressToken string
	key           string // the id's key in the Conn's table of requests in flight
}
