package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/wire"

	"github.com/tidwall/gjson"
)

// progressTokenMember is looked for before parsing for it. It starts with a
// letter rare in JSON rather than a quote, so that bytes.Index skips ahead.
var progressTokenMember = []byte(`progressToken"`)

// DefaultHookTimeout bounds a rewriting hook when Conn.HookTimeout is zero.
const DefaultHookTimeout = 250 * time.Millisecond

// Conn is the transport-independent heart of the proxy for one session: it
// classifies each message, keeps the requests in flight in both directions,
// runs the hooks at the interception points and hands every finished
// exchange to Hooks.Exchange. Transports (stdio, Streamable HTTP, SSE) feed
// it messages and write what it returns. A Conn is safe for concurrent use.
type Conn struct {
	Hooks       *Hooks        // nil: no hooks
	Session     *Session      // must be set
	Logger      *slog.Logger  // nil: slog.Default()
	HookTimeout time.Duration // bounds rewriting hooks; 0: DefaultHookTimeout

	mu          sync.Mutex
	fromClient  map[string]*Exchange  // agent → server requests in flight
	fromServer  map[string]*Exchange  // server → agent requests in flight
	progress    map[string]*Exchange  // progress token → agent request
	local       map[string]*localCall // agent requests answered by the sidecar
	initRequest []byte                // last initialize request, for replay
	initialized []byte                // last notifications/initialized
}

// Action is what a transport does with a message from the agent. At most one
// of Forward, Reply and Local is set; none is set for input that was only
// logged.
type Action struct {
	Forward []byte // send to the server
	Reply   []byte // send to the agent now
	// Local produces the reply off the read loop: call it on a goroutine of
	// its own and send what it returns to the agent. It returns nil when
	// the agent cancelled the request meanwhile: nothing is to be sent.
	Local func(ctx context.Context) []byte
	// Batch holds, for a batch (Forward), the ids of its requests that
	// the Conn put in flight: a transport whose upstream answered the
	// batch without answering them all fails the rest (see Conn.Fail).
	Batch []json.RawMessage
}

func (c *Conn) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// noHooks stands in for a nil Conn.Hooks; it is never modified.
var noHooks Hooks

func (c *Conn) hooks() *Hooks {
	if c.Hooks != nil {
		return c.Hooks
	}
	return &noHooks
}

func (c *Conn) hookTimeout() time.Duration {
	if c.HookTimeout > 0 {
		return c.HookTimeout
	}
	return DefaultHookTimeout
}

// FromClient takes one message from the agent. The Conn keeps raw (in the
// Exchange, and as the key of the request in flight): the caller must
// never modify it afterwards.
func (c *Conn) FromClient(raw []byte) Action { return c.fromClientAt(raw, time.Now()) }

// fromClientAt is FromClient for a message that arrived at now. A transport
// that reads a burst of messages at once passes the time of that read.
func (c *Conn) fromClientAt(raw []byte, now time.Time) Action {
	m, err := Parse(raw)
	if err != nil {
		return c.invalid(m, err, "agent")
	}
	switch m.Kind {
	case KindBatch:
		return Action{Forward: m.Raw, Batch: c.clientBatch(m.Raw, now)}
	case KindRequest:
		ex := c.clientRequest(&m, now)
		if m.Method == "tools/call" {
			if a, ok := c.localToolCall(&m, ex); ok {
				return a
			}
		}
		if !c.putInFlight(ex, &m) {
			// Its answer could not be told from the first one's: JSON-RPC
			// ids are unique among requests in flight.
			return Action{Reply: ErrorResponse(m.ID, CodeInvalidRequest,
				"Invalid Request: id "+truncate(ex.key, 80)+" is already used by a request in flight")}
		}
	case KindNotification:
		if m.Method == "notifications/cancelled" && c.cancelLocal(m.Raw) {
			return Action{} // the server never saw that request
		}
		c.clientNotification(&m)
	case KindResponse:
		// The agent's answer to a server's request: recorded before it
		// is forwarded.
		if _, ex := c.complete(&c.fromServer, &m, now); ex != nil {
			c.record([]*Exchange{ex})
			c.emit(ex)
		}
	}
	return Action{Forward: m.Raw}
}

// clientRequest returns the exchange of the agent's request m, noting the
// agent's initialize.
func (c *Conn) clientRequest(m *Message, now time.Time) *Exchange {
	ex := &Exchange{Session: c.Session, Direction: hindsight.ClientToServer, Method: m.Method,
		ID: m.ID, Request: m.Raw, Started: now}
	switch m.Method {
	case "initialize", "server/discover":
		c.noteClient(m.Raw)
		if m.Method == "initialize" {
			c.mu.Lock()
			c.initRequest = m.Raw
			c.mu.Unlock()
		}
	}
	return ex
}

// putInFlight tracks ex, the agent's request m, until its answer; it
// reports false, tracking nothing, when m's id is already in flight.
func (c *Conn) putInFlight(ex *Exchange, m *Message) bool {
	if meta := m.member(m.meta); bytes.Contains(meta, progressTokenMember) {
		if tok := gjson.Get(wire.StringView(meta), "progressToken"); tok.Exists() {
			ex.progressToken = tok.Raw // aliases raw, which is never modified
		}
	}
	ex.key = wire.StringView(m.ID) // raw is never modified: a key that aliases it is stable
	c.mu.Lock()
	if c.fromClient[ex.key] != nil {
		c.mu.Unlock()
		c.logger().Warn("request id already in flight", "server", c.Session.Server, "id", truncate(ex.key, 80))
		return false
	}
	c.track(&c.fromClient, ex.key, ex)
	if ex.progressToken != "" {
		c.track(&c.progress, ex.progressToken, ex)
	}
	c.mu.Unlock()
	return true
}

// clientNotification takes note of the agent's notification m.
func (c *Conn) clientNotification(m *Message) {
	switch m.Method {
	case "notifications/cancelled":
		c.cancelled(m.Raw, &c.fromClient) // the agent gives up on its own request
	case "notifications/initialized":
		c.mu.Lock()
		c.initialized = m.Raw
		c.mu.Unlock()
	}
}

// FromServer takes one message from the server and returns the bytes to
// deliver to the agent, or nil when nothing is to be delivered. Like
// FromClient, it keeps raw. The exchange a response completes goes to
// Hooks.Record and then Hooks.Exchange before FromServer returns, so
// before its answer is written.
func (c *Conn) FromServer(raw []byte) []byte {
	out, ex := c.fromServerAt(raw, time.Now())
	if ex != nil {
		c.record([]*Exchange{ex})
		c.emit(ex)
	}
	return out
}

// fromServerAt is FromServer for a message that arrived at now, except that
// the exchange a response completes is returned rather than handed to
// Hooks.Exchange: the caller emits it (see Conn.emit) once it relayed out,
// so that the agent does not wait for the hook.
func (c *Conn) fromServerAt(raw []byte, now time.Time) (out []byte, done *Exchange) {
	m, err := Parse(raw)
	if err == ErrParse {
		// Not JSON at all: typically a server that logs to stdout. It
		// would only break the agent's reader; log it and skip it.
		c.logger().Warn("server wrote a line that is not JSON; skipped", "server", c.Session.Server,
			"bytes", len(m.Raw), "line", truncate(string(m.Raw), 200))
		return nil, nil
	}
	if err != nil {
		// JSON, but not JSON-RPC as we know it: the agent's SDK decides;
		// the proxy does not hide a server's bug or a newer protocol.
		c.logger().Warn("server sent a malformed message", "server", c.Session.Server, "err", err, "bytes", len(m.Raw))
		return m.Raw, nil
	}
	switch m.Kind {
	case KindBatch:
		c.serverBatch(m.Raw, now)
	case KindRequest:
		c.serverRequest(&m, now)
	case KindNotification:
		c.serverNotification(&m)
	case KindResponse:
		return c.complete(&c.fromClient, &m, now)
	}
	return m.Raw, nil
}

// serverRequest tracks the server's request m until the agent answers it.
func (c *Conn) serverRequest(m *Message, now time.Time) {
	ex := &Exchange{Session: c.Session, Direction: hindsight.ServerToClient, Method: m.Method,
		ID: m.ID, Request: m.Raw, Started: now, key: wire.StringView(m.ID)}
	c.mu.Lock()
	c.track(&c.fromServer, ex.key, ex)
	c.mu.Unlock()
}

// serverNotification takes note of the server's notification m.
func (c *Conn) serverNotification(m *Message) {
	switch m.Method {
	case "notifications/progress":
		// tok aliases raw: it is only looked up, never kept.
		if tok := gjson.Get(wire.StringView(m.Raw), "params.progressToken"); tok.Exists() {
			c.mu.Lock()
			if ex := c.progress[tok.Raw]; ex != nil {
				ex.Notifications++
			}
			c.mu.Unlock()
		}
	case "notifications/cancelled":
		c.cancelled(m.Raw, &c.fromServer) // the server gives up on its own request
	}
}

// FailPending ends every agent request in flight with a JSON-RPC error
// saying why, and returns the error responses to send to the agent. Server
// requests in flight are forgotten (their server is gone).
func (c *Conn) FailPending(reason string) [][]byte {
	c.mu.Lock()
	pending := c.fromClient
	c.fromClient, c.fromServer, c.progress = nil, nil, nil
	c.mu.Unlock()
	var out [][]byte
	exs := make([]*Exchange, 0, len(pending))
	now := time.Now()
	for _, ex := range pending {
		resp := ErrorResponse(ex.ID, CodeServerUnavailable, reason)
		ex.Response, ex.Ended, ex.Failure = resp, now, reason
		out = append(out, resp)
		exs = append(exs, ex)
	}
	c.record(exs)
	for _, ex := range exs {
		c.emit(ex)
	}
	return out
}

// Fail ends the agent's request id in flight with resp, the answer relayed
// for it in place of the server's response (an error the sidecar made up,
// or the server's error that names no id), and hands the exchange, with
// failure as its Failure, to Hooks.Record and Hooks.Exchange: call it
// before resp is written. It reports whether such a request was in
// flight.
func (c *Conn) Fail(id json.RawMessage, resp []byte, failure string) bool {
	ex := c.take(&c.fromClient, string(id))
	if ex == nil {
		return false
	}
	ex.Response, ex.Ended, ex.Failure = resp, time.Now(), failure
	c.record([]*Exchange{ex})
	c.emit(ex)
	return true
}

// inFlight reports whether the agent's request id is in flight.
func (c *Conn) inFlight(id json.RawMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fromClient[string(id)] != nil
}

// Pending reports how many agent requests are in flight.
func (c *Conn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.fromClient)
}

// Handshake returns the agent's last initialize request and initialized
// notification, for replay to a restarted server.
func (c *Conn) Handshake() (initialize, initialized []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.initRequest, c.initialized
}

func (c *Conn) invalid(m Message, err error, from string) Action {
	c.logger().Warn("malformed message", "from", from, "server", c.Session.Server, "err", err, "bytes", len(m.Raw))
	if err == ErrParse {
		if id, deep := tooDeepID(m.Raw); deep && id != nil {
			// Valid JSON but for its depth: the sender waits for its id.
			return Action{Reply: ErrorResponse(id, CodeInvalidRequest,
				fmt.Sprintf("Invalid Request: nested deeper than %d levels, which cannot be relayed", wire.MaxNesting))}
		}
		// The id cannot be trusted from invalid JSON: answer with a null id.
		return Action{Reply: ErrorResponse(nil, CodeParseError, "Parse error: "+truncate(string(m.Raw), 80))}
	}
	switch {
	case m.ID != nil:
		return Action{Reply: ErrorResponse(m.ID, CodeInvalidRequest, "Invalid Request: "+err.Error())}
	case m.hasID:
		// An id that is not a string, a number or null cannot be echoed
		// back as the agent's id: answer with null, as JSON-RPC says.
		return Action{Reply: ErrorResponse(nil, CodeInvalidRequest, "Invalid Request: the id must be a string, a number or null")}
	case m.hasMethod:
		return Action{} // a notification: JSON-RPC never answers one
	}
	// Neither an id nor a method (a scalar, an object of other members):
	// nothing to match, but never silence.
	return Action{Reply: ErrorResponse(nil, CodeInvalidRequest, "Invalid Request: "+err.Error())}
}

// take removes the request in flight under key from table, and returns it
// (nil when there is none).
func (c *Conn) take(table *map[string]*Exchange, key string) *Exchange {
	c.mu.Lock()
	defer c.mu.Unlock()
	ex := (*table)[key]
	if ex != nil {
		delete(*table, ex.key)
		if ex.progressToken != "" {
			delete(c.progress, ex.progressToken)
		}
	}
	return ex
}

func (c *Conn) track(m *map[string]*Exchange, key string, ex *Exchange) {
	if *m == nil {
		*m = make(map[string]*Exchange)
	}
	(*m)[key] = ex
}

// complete matches a response to its request in table and rewrites it at
// the interception points. It returns the message to relay and the
// completed exchange, which the caller emits (nil when the response
// answers nothing in flight).
func (c *Conn) complete(table *map[string]*Exchange, m *Message, now time.Time) ([]byte, *Exchange) {
	ex := c.take(table, string(m.ID)) // no allocation for the lookup
	if ex == nil {
		return m.Raw, nil // an answer to nothing we saw, or after a cancel: relay as is
	}
	out := m.Raw
	if ex.Direction == hindsight.ClientToServer {
		out = c.rewrite(ex, m, now)
	}
	ex.Response, ex.Ended = out, now
	return out, ex
}

// rewrite runs the rewriting hook for ex's method, if any, on the result
// in m, and returns the message to relay.
func (c *Conn) rewrite(ex *Exchange, m *Message, now time.Time) []byte {
	h := c.hooks()
	switch ex.Method {
	case "initialize", "server/discover":
		if h.Initialize == nil {
			return m.Raw
		}
	case "tools/list":
		if h.ToolsList == nil {
			return m.Raw
		}
	case "tools/call":
		if h.ToolResult == nil {
			return m.Raw
		}
	default:
		return m.Raw
	}
	raw, res := m.Raw, m.result
	if !res.ok() || raw[res.start] != '{' {
		return raw // an error response: nothing to rewrite
	}
	ctx := newHookContext(now, c.hookTimeout())
	replaced := c.runHook(ctx, h, ex, json.RawMessage(raw[res.start:res.end:res.end]))
	ctx.end(context.Canceled)
	if replaced == nil {
		return raw
	}
	out := make([]byte, 0, len(raw)-(res.end-res.start)+len(replaced))
	out = append(out, raw[:res.start]...)
	out = append(out, replaced...)
	return append(out, raw[res.end:]...)
}

// runHook runs the rewriting hook for ex's method; a panicking hook is
// logged and its rewrite dropped, so hooks can never break the relay.
func (c *Conn) runHook(ctx context.Context, h *Hooks, ex *Exchange, result json.RawMessage) (out json.RawMessage) {
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("hook panicked; relaying unchanged", "method", ex.Method, "panic", fmt.Sprint(r))
			out = nil
		}
	}()
	switch ex.Method {
	case "tools/call":
		out = h.ToolResult(ctx, ex, result)
	case "tools/list":
		out = h.ToolsList(ctx, c.Session, result)
	default:
		out = h.Initialize(ctx, c.Session, result)
	}
	if out == nil {
		return nil
	}
	out = compact(out)
	if !wire.Valid(out) {
		c.logger().Error("hook returned invalid JSON; relaying unchanged", "method", ex.Method)
		return nil
	}
	return out
}

func (c *Conn) cancelled(raw []byte, table *map[string]*Exchange) {
	id := gjson.GetBytes(raw, "params.requestId")
	if !id.Exists() {
		return
	}
	if ex := c.take(table, id.Raw); ex != nil {
		ex.Cancelled, ex.Ended = true, time.Now()
		if table == &c.fromClient {
			c.record([]*Exchange{ex}) // before the cancellation is relayed
		}
		c.emit(ex)
	}
}

// record runs Hooks.Record on exs, the exchanges whose answers are about
// to be written to the agent; a hook that panics is logged and ignored.
func (c *Conn) record(exs []*Exchange) {
	h := c.hooks()
	if h.Record == nil || len(exs) == 0 {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("record hook panicked", "exchanges", len(exs), "panic", fmt.Sprint(r))
		}
	}()
	h.Record(exs)
}

func (c *Conn) emit(ex *Exchange) {
	h := c.hooks()
	if h.Exchange == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error("exchange hook panicked", "method", ex.Method, "panic", fmt.Sprint(r))
		}
	}()
	h.Exchange(ex)
}

func (c *Conn) noteClient(raw []byte) {
	r := gjson.GetManyBytes(raw, "params.clientInfo.name", "params.clientInfo.version", "params.protocolVersion")
	c.Session.SetClient(r[0].String(), r[1].String(), r[2].String())
}

// compact removes the line breaks a hook's pretty-printed JSON may hold:
// on stdio a newline ends the message.
func compact(b []byte) []byte {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return b
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b // invalid: the caller's validation says so
	}
	return buf.Bytes()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
