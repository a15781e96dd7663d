package proxy

import (
	"bytes"
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
	// through the sink. An HTTP error status whose body is a JSON-RPC
	// message is a Reply with that Status (the server's own answer, to
	// relay as it came); any other error status is returned as
	// *StatusError, and an answer that is no JSON-RPC at all as
	// *BadReplyError. ctx bounds the exchange, including reading the Reply.
	Send(ctx context.Context, msg []byte, hdr http.Header) (*Reply, error)
	// Close ends the session and releases what it holds.
	Close() error
}

// Reply is the server's answer to one Send: a single JSON message or a
// stream of server-sent events.
type Reply struct {
	Status int         // the upstream's HTTP status: 2xx, or an error status with a JSON-RPC body
	Header http.Header // the upstream's response headers
	Stream bool        // the server answered with text/event-stream
	URL    string      // the upstream, without credentials or query, for errors that name it

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
	ev, err := r.events.nextMessage()
	return ev.Data, err
}

// nextEvent returns the next event of a stream reply, messages or not
// (the priming event, a retry field), with its id and retry fields.
func (r *Reply) nextEvent() (sseEvent, error) {
	if !r.Stream {
		m, err := r.Next()
		return sseEvent{Data: m, HasData: true}, err
	}
	return r.events.Next()
}

// failed reports whether the server answered with an error status.
func (r *Reply) failed() bool { return r.Status/100 != 2 }

// Close releases the reply's body.
func (r *Reply) Close() error {
	if r.body != nil {
		return r.body.Close()
	}
	return nil
}

// StatusError is an HTTP error status from the upstream whose body is no
// JSON-RPC message.
type StatusError struct {
	Code    int
	Message string      // the JSON-RPC error message or the start of the body
	Header  http.Header // the upstream's response headers
	URL     string      // the upstream, without credentials or query
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("upstream HTTP %d: %s%s", e.Code, e.Message, from(e.URL))
}

// BadReplyError is a 2xx answer from the upstream that is no JSON-RPC
// message (an HTML page, say).
type BadReplyError struct {
	ContentType string
	Start       string // the start of the body
	URL         string // the upstream, without credentials or query
}

func (e *BadReplyError) Error() string {
	return fmt.Sprintf("upstream answered %s, not JSON-RPC: %q%s", e.ContentType, e.Start, from(e.URL))
}

func from(url string) string {
	if url == "" {
		return ""
	}
	return " (from " + url + ")"
}

// statusError reads what an error response says, without reading much.
func statusError(resp *http.Response) *StatusError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return statusErrorOf(resp, b)
}

func statusErrorOf(resp *http.Response, b []byte) *StatusError {
	msg := ""
	if e := gjson.GetBytes(b, "error.message"); e.Type == gjson.String {
		msg = e.Str
	} else {
		msg = bodyStart(b)
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &StatusError{Code: resp.StatusCode, Message: msg, Header: resp.Header, URL: redactedURL(resp.Request)}
}

// bodyStart is the start of a body, for an error message.
func bodyStart(b []byte) string {
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "…"
	}
	return msg
}

// redactedURL names the upstream a request went to, without user
// information, query or fragment (where credentials may hide).
func redactedURL(req *http.Request) string {
	if req == nil || req.URL == nil {
		return ""
	}
	u := *req.URL
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// isJSONRPC reports whether b is one JSON-RPC message, or a batch of them,
// as a server answers: a jsonrpc member with a result, an error or a
// method.
func isJSONRPC(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || (b[0] != '{' && b[0] != '[') || !gjson.ValidBytes(b) {
		return false
	}
	if b[0] == '[' {
		first := gjson.GetBytes(b, "0")
		return first.IsObject() && isJSONRPC([]byte(first.Raw))
	}
	r := gjson.GetManyBytes(b, "jsonrpc", "result", "error", "method")
	return r[0].Str == "2.0" && (r[1].Exists() || r[2].Exists() || r[3].Exists())
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
