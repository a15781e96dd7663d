package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// Upstream transports.
const (
	TransportAuto       = "auto"
	TransportStreamable = "streamable-http"
	TransportSSE        = "sse"
)

// HTTPUpstream is an MCP server reached over HTTP: Streamable HTTP, or the
// legacy HTTP+SSE transport of spec 2024-11-05. In auto mode each session
// first POSTs to URL and falls back to SSE on 404 or 405, as the spec's
// backwards-compatibility section describes; the first answer decides for
// the sessions that follow.
type HTTPUpstream struct {
	URL       string
	Transport string      // TransportAuto ("" too), TransportStreamable or TransportSSE
	Header    http.Header // set on every request, replacing the agent's (the upstream's credentials)
	Client    *http.Client
	Logger    *slog.Logger
	MaxBytes  int // bounds one message; 0: DefaultMaxMessageBytes

	mu       sync.Mutex
	detected string
	guarded  *http.Client // Client (or the default) with guardRedirects
}

// client is the configured client, following redirects within the
// upstream's origin only (see guardRedirects).
func (u *HTTPUpstream) client() *http.Client {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.guarded == nil {
		c := u.Client
		if c == nil {
			c = http.DefaultClient
		}
		u.guarded = guardRedirects(c)
	}
	return u.guarded
}

func (u *HTTPUpstream) logger() *slog.Logger {
	if u.Logger != nil {
		return u.Logger
	}
	return slog.Default()
}

func (u *HTTPUpstream) maxBytes() int {
	if u.MaxBytes > 0 {
		return u.MaxBytes
	}
	return DefaultMaxMessageBytes
}

func (u *HTTPUpstream) mode() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.detected != "" {
		return u.detected
	}
	switch u.Transport {
	case TransportStreamable, TransportSSE:
		return u.Transport
	}
	return TransportAuto
}

func (u *HTTPUpstream) detect(t string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.detected == "" {
		u.detected = t
		u.logger().Info("upstream transport detected", "url", u.URL, "transport", t)
	}
}

// newRequest builds a request carrying the agent's headers, with the
// configured upstream headers on top.
func (u *HTTPUpstream) newRequest(ctx context.Context, method, target string, body []byte, hdr http.Header) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, err
	}
	for k, vv := range hdr {
		req.Header[k] = append([]string(nil), vv...)
	}
	for k, vv := range u.Header {
		req.Header[http.CanonicalHeaderKey(k)] = append([]string(nil), vv...)
	}
	return req, nil
}

// Dial opens a session with the server.
func (u *HTTPUpstream) Dial(ctx context.Context, hdr http.Header, sink UpstreamSink) (UpstreamSession, error) {
	switch u.mode() {
	case TransportSSE:
		return u.dialSSE(ctx, hdr, sink)
	case TransportStreamable:
		return &streamableSession{u: u, sink: sink}, nil
	}
	return &autoSession{u: u, sink: sink}, nil
}

// autoSession picks the transport at the first Send.
type autoSession struct {
	u    *HTTPUpstream
	sink UpstreamSink

	mu     sync.Mutex
	inner  UpstreamSession
	closed bool
}

func (s *autoSession) Send(ctx context.Context, msg []byte, hdr http.Header) (*Reply, error) {
	s.mu.Lock()
	if s.inner != nil {
		inner := s.inner
		s.mu.Unlock()
		return inner.Send(ctx, msg, hdr)
	}
	defer s.mu.Unlock() // the first Send decides; others wait for it
	if s.closed {
		return nil, errors.New("session closed")
	}
	st := &streamableSession{u: s.u, sink: s.sink}
	reply, err := st.Send(ctx, msg, hdr)
	var se *StatusError
	// Only an initialize decides, as the spec's backwards-compatibility
	// section has it: a sessionless request may be refused for other reasons.
	isInit := gjson.GetBytes(msg, "method").Str == "initialize"
	if isInit && errors.As(err, &se) && (se.Code == http.StatusNotFound || se.Code == http.StatusMethodNotAllowed) {
		s.u.logger().Info("upstream refused a Streamable HTTP POST; trying the legacy SSE transport", "url", s.u.URL, "status", se.Code)
		sse, derr := s.u.dialSSE(ctx, hdr, s.sink)
		if derr != nil {
			return nil, fmt.Errorf("%w (SSE fallback: %v)", err, derr)
		}
		s.u.detect(TransportSSE)
		s.inner = sse
		return sse.Send(ctx, msg, hdr)
	}
	if err == nil && isInit && (reply == nil || !reply.failed()) {
		s.u.detect(TransportStreamable)
		s.inner = st
	}
	return reply, err
}

func (s *autoSession) Resumable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.inner.(*streamableSession)
	return ok
}

// Resume resumes a stream of the Streamable HTTP session (see
// streamableSession.Resume).
func (s *autoSession) Resume(ctx context.Context, lastID string, hdr http.Header) (*Reply, error) {
	s.mu.Lock()
	inner, _ := s.inner.(*streamableSession)
	s.mu.Unlock()
	if inner == nil {
		return nil, errNotResumable
	}
	return inner.Resume(ctx, lastID, hdr)
}

func (s *autoSession) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.inner != nil {
		return s.inner.Close()
	}
	return nil
}

// streamableSession is a session over Streamable HTTP (spec 2025-03-26 on).
type streamableSession struct {
	u    *HTTPUpstream
	sink UpstreamSink

	mu        sync.Mutex
	sessionID string      // the upstream's Mcp-Session-Id
	hdr       http.Header // the agent's latest headers, for the listening stream
	listening bool
	ready     chan struct{} // closed once the first GET stream was answered (or failed)
	stop      context.CancelFunc
	closed    bool
}

// listenWait bounds how long a notifications/initialized waits for the
// listening stream to open before it is sent anyway.
const listenWait = 2 * time.Second

func (s *streamableSession) Send(ctx context.Context, msg []byte, hdr http.Header) (*Reply, error) {
	initialized := gjson.GetBytes(msg, "method").Str == "notifications/initialized"
	if initialized {
		// A server may send messages of its own as soon as it hears the
		// client is initialized (the everything server sends
		// tools/list_changed then), on the standalone GET stream, and
		// drops them when no stream is open: open it first, as a direct
		// client does, and wait until the server has answered it.
		s.mu.Lock()
		s.hdr = hdr
		s.mu.Unlock()
		s.startListening()
		s.awaitListening(ctx)
	}
	req, err := s.u.newRequest(ctx, http.MethodPost, s.u.URL, msg, hdr)
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	s.mu.Lock()
	if s.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", s.sessionID)
	}
	s.hdr = hdr
	s.mu.Unlock()
	resp, err := s.u.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("post to upstream: %w", err)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" && gjson.GetBytes(msg, "method").Str == "initialize" {
		s.mu.Lock()
		if s.sessionID == "" {
			s.sessionID = id
		}
		s.mu.Unlock()
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode/100 != 2:
		return s.u.errorReply(resp)
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, nil
	case ct == "text/event-stream":
		return s.u.streamReply(resp), nil
	}
	defer resp.Body.Close()
	b, err := s.u.readBody(resp)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 && peek(msg).Kind != KindRequest {
		return nil, nil // a notification's or response's answer
	}
	if !isJSONRPC(b) { // or empty, for a request
		return nil, &BadReplyError{ContentType: orNone(resp.Header.Get("Content-Type")), Start: bodyStart(b), URL: redactedURL(resp.Request)}
	}
	return &Reply{Status: resp.StatusCode, Header: resp.Header, URL: redactedURL(resp.Request), single: b}, nil
}

// errorReply turns an error status into a Reply when its body is a
// JSON-RPC message (the server's own answer: invalid params, an
// unsupported protocol version, a header that does not match the body),
// and into a *StatusError otherwise.
func (u *HTTPUpstream) errorReply(resp *http.Response) (*Reply, error) {
	defer resp.Body.Close()
	b, err := u.readBody(resp)
	if err != nil {
		return nil, fmt.Errorf("%w (reading it: %v)", statusErrorOf(resp, b), err)
	}
	if isJSONRPC(b) {
		return &Reply{Status: resp.StatusCode, Header: resp.Header, URL: redactedURL(resp.Request), single: b}, nil
	}
	return nil, statusErrorOf(resp, b)
}

// streamReply is the Reply of an event stream, read as it comes.
func (u *HTTPUpstream) streamReply(resp *http.Response) *Reply {
	return &Reply{Status: resp.StatusCode, Header: resp.Header, URL: redactedURL(resp.Request), Stream: true,
		events: newSSEReader(resp.Body, u.maxBytes()), body: resp.Body}
}

// readBody reads a response body up to the message size bound.
func (u *HTTPUpstream) readBody(resp *http.Response) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(u.maxBytes())+1))
	if err != nil {
		return b, fmt.Errorf("read upstream reply: %w", err)
	}
	if len(b) > u.maxBytes() {
		return b[:0], fmt.Errorf("read upstream reply: %w", errTooLarge)
	}
	return b, nil
}

func orNone(ct string) string {
	if ct == "" {
		return "without a Content-Type"
	}
	return ct
}

// errNotResumable: the session's streams cannot be resumed upstream.
var errNotResumable = errors.New("the upstream session has no resumable streams")

// resumer is an upstream session whose streams the server can resume.
type resumer interface {
	// Resumable reports whether the session's streams are the server's
	// (Streamable HTTP), to be resumed upstream.
	Resumable() bool
	// Resume asks the server for the events of a stream after lastID
	// (a GET with Last-Event-ID, SEP-1699): the answer is a stream Reply,
	// or a Reply with an error status and a JSON-RPC body.
	Resume(ctx context.Context, lastID string, hdr http.Header) (*Reply, error)
}

func (s *streamableSession) Resumable() bool { return true }

// Resume asks the server for the events after lastID, of the stream it
// closed (a POST's, to be polled, or the listening one).
func (s *streamableSession) Resume(ctx context.Context, lastID string, hdr http.Header) (*Reply, error) {
	req, err := s.u.newRequest(ctx, http.MethodGet, s.u.URL, nil, hdr)
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	s.mu.Lock()
	if s.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", s.sessionID)
	}
	s.mu.Unlock()
	resp, err := s.u.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("resume upstream stream: %w", err)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode/100 != 2:
		return s.u.errorReply(resp)
	case ct != "text/event-stream":
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, &BadReplyError{ContentType: orNone(resp.Header.Get("Content-Type")), Start: bodyStart(b), URL: redactedURL(resp.Request)}
	}
	return s.u.streamReply(resp), nil
}

// startListening opens the GET stream for server-initiated messages once.
func (s *streamableSession) startListening() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listening || s.closed {
		return
	}
	s.listening = true
	s.ready = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.listen(ctx, s.ready)
}

// awaitListening waits, at most listenWait, until the first GET stream was
// answered.
func (s *streamableSession) awaitListening(ctx context.Context) {
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ready == nil {
		return
	}
	t := time.NewTimer(listenWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
	}
}

// listen keeps a GET stream open, reconnecting with capped backoff, until
// the session closes or the server says it offers none (405). It closes
// ready once the first attempt was answered.
func (s *streamableSession) listen(ctx context.Context, ready chan struct{}) {
	var once sync.Once
	signal := func() { once.Do(func() { close(ready) }) }
	defer signal()
	backoff := 250 * time.Millisecond
	lastID := "" // the stream's last event id: a reconnect resumes after it
	for ctx.Err() == nil {
		s.mu.Lock()
		hdr, sid := s.hdr, s.sessionID
		s.mu.Unlock()
		req, err := s.u.newRequest(ctx, http.MethodGet, s.u.URL, nil, hdr)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := s.u.client().Do(req)
		signal() // answered: the server knows the stream, or will not have one
		switch {
		case err != nil:
		case resp.StatusCode == http.StatusMethodNotAllowed:
			resp.Body.Close()
			return
		case resp.StatusCode == http.StatusNotFound && sid != "":
			err := statusError(resp)
			resp.Body.Close()
			s.gone(fmt.Errorf("upstream session ended: %w", err))
			return
		case resp.StatusCode/100 != 2:
			s.u.logger().Warn("upstream listening stream refused", "status", resp.StatusCode)
			resp.Body.Close()
		default:
			r := newSSEReader(resp.Body, s.u.maxBytes())
			for {
				ev, err := r.Next()
				if err != nil {
					break
				}
				if ev.ID != "" {
					lastID = ev.ID
				}
				if ev.message() {
					s.sink.Message(ev.Data)
					backoff = 250 * time.Millisecond
				}
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (s *streamableSession) gone(err error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if !closed && s.sink.Closed != nil {
		s.sink.Closed(err)
	}
}

// Close stops the listening stream and ends the upstream session with a
// DELETE, as the spec asks of a client that leaves.
func (s *streamableSession) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.stop != nil {
		s.stop()
	}
	sid, hdr := s.sessionID, s.hdr
	s.mu.Unlock()
	if sid == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := s.u.newRequest(ctx, http.MethodDelete, s.u.URL, nil, hdr)
	if err != nil {
		return err
	}
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := s.u.client().Do(req)
	if err != nil {
		return fmt.Errorf("end upstream session: %w", err)
	}
	resp.Body.Close()
	return nil
}
