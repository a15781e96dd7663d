package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// Upstream opens sessions with the MCP server behind an HTTP sidecar, one
// per agent session. HTTPUpstream reaches a server over HTTP,
// CommandUpstream runs one as a child process.
type Upstream interface {
	// Dial opens a session. hdr holds the agent's request headers to pass
	// on (hop-by-hop headers already removed). ctx bounds only the opening;
	// the session lives until Close or until the server ends it.
	Dial(ctx context.Context, hdr http.Header, sink UpstreamSink) (UpstreamSession, error)
}

// UpstreamSink receives what a server sends outside the reply to a Send.
// The funcs are called from the session's own goroutines.
type UpstreamSink struct {
	// Message receives one message. The slice is the receiver's to keep.
	Message func(msg []byte)
	// Closed is called once when the session ends on the server's side
	// (the child exited, the stream broke); not after Close.
	Closed func(err error)
}

// UpstreamSession is one session with the server.
type UpstreamSession interface {
	// Send delivers one message from the agent. hdr holds the agent's
	// headers for this message. When the server answers within the same
	// exchange (Streamable HTTP), Send returns a Reply carrying the
	// server's messages; otherwise it returns nil and answers arrive
	// through the sink. An HTTP error status is returned as *StatusError.
	// ctx bounds the exchange, including reading the Reply.
	Send(ctx context.Context, msg []byte, hdr http.Header) (*Reply, error)
	// Close ends the session and releases what it holds.
	Close() error
}

// Reply is the server's answer to one Send: a single JSON message or a
// stream of server-sent events.
type Reply struct {
	Header http.Header // the upstream's response headers
	Stream bool        // the server answered with text/event-stream

	single []byte
	events *sseReader
	body   io.Closer
}

// Next returns the next message of the reply, or io.EOF at its end.
func (r *Reply) Next() ([]byte, error) {
	if !r.Stream {
		if r.single == nil {
			return nil, io.EOF
		}
		m := r.single
		r.single = nil
		return m, nil
	}
	for {
		ev, err := r.events.Next()
		if err != nil {
			return nil, err
		}
		if ev.Event == "" || ev.Event == "message" {
			return ev.Data, nil
		}
	}
}

// Close releases the reply's body.
func (r *Reply) Close() error {
	if r.body != nil {
		return r.body.Close()
	}
	return nil
}

// StatusError is an HTTP error status from the upstream.
type StatusError struct {
	Code    int
	Message string      // the JSON-RPC error message or the start of the body
	Header  http.Header // the upstream's response headers
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("upstream HTTP %d: %s", e.Code, e.Message)
}

// statusError reads what an error response says, without reading much.
func statusError(resp *http.Response) *StatusError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := ""
	if e := gjson.GetBytes(b, "error.message"); e.Type == gjson.String {
		msg = e.Str
	} else {
		msg = strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &StatusError{Code: resp.StatusCode, Message: msg, Header: resp.Header}
}

// hopHeaders are dropped when a request is passed on (RFC 9110 §7.6.1),
// along with headers the sidecar sets itself.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	// Set per hop by the sidecar, or by Go's transport.
	"Host", "Content-Length", "Content-Type", "Accept", "Accept-Encoding",
	"Mcp-Session-Id", "Last-Event-Id",
}

// ForwardHeader returns the agent's request headers to pass upstream:
// everything except hop-by-hop headers (and those the sidecar sets per hop).
// With dropAuth, the agent's Authorization is dropped too (the sidecar
// checked it as its own token).
func ForwardHeader(in http.Header, dropAuth bool) http.Header {
	out := in.Clone()
	if out == nil {
		out = http.Header{}
	}
	for _, v := range in.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			out.Del(strings.TrimSpace(name))
		}
	}
	for _, h := range hopHeaders {
		out.Del(h)
	}
	if dropAuth {
		out.Del("Authorization")
	}
	return out
}

// replyHeaderSkip are upstream response headers not passed to the agent.
var replyHeaderSkip = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Content-Type": true, "Content-Encoding": true, "Mcp-Session-Id": true, "Date": true,
}

func copyReplyHeader(dst, src http.Header) {
	for k, vv := range src {
		if replyHeaderSkip[k] {
			continue
		}
		dst[k] = append(dst[k][:0:0], vv...)
	}
}

// isResponseTo reports whether msg is a response to the request with id.
func isResponseTo(msg []byte, id json.RawMessage) bool {
	r := gjson.GetManyBytes(msg, "id", "method")
	return r[0].Exists() && !r[1].Exists() && r[0].Raw == string(id)
}
