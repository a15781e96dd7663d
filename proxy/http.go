package proxy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HTTPHandler is the agent-facing side of the HTTP sidecar. It serves MCP
// Streamable HTTP (spec 2025-11-25) at /mcp and the legacy HTTP+SSE
// transport at /sse, with its message endpoint at /message, and relays each
// agent session to a session of its own with Upstream through a Conn.
//
// Sessions: an initialize POST to /mcp without Mcp-Session-Id, or a GET of
// /sse, opens a session with an id of the sidecar's (the Mcp-Session-Id
// the agent then sends, or the sessionId of the SSE endpoint); the upstream
// session behind it keeps the upstream's own id. A POST without a session
// that is not an initialize (spec 2026-07-28's server/discover and its
// sessionless requests) goes through one shared session that is never
// announced. DELETE ends a session; so does the upstream ending it (the
// agent then gets 404 and initializes again).
//
// Messages pass unchanged except where Hooks rewrite them. Answers to a
// POSTed request go back on that POST, as JSON or as an event stream
// mirroring the upstream's choice; server messages outside a request go to
// the agent's GET stream (queued until one is open, or sent on an open
// request stream when there is none).
type HTTPHandler struct {
	Upstream Upstream // required
	Server   string   // the server's name, for sessions and logs
	Hooks    *Hooks
	Logger   *slog.Logger
	// HookTimeout bounds rewriting hooks (see Conn.HookTimeout).
	HookTimeout time.Duration
	// TaskID is the explicit task id of every session, if any.
	TaskID string

	// AuthToken, when set, is the bearer token every agent request must
	// carry; the agent's Authorization is then not passed upstream.
	// Otherwise the agent's headers, Authorization included, reach the
	// upstream unchanged.
	AuthToken string
	// AllowRemote, without AllowedHosts, skips the checks that the Host
	// header and a browser's Origin name loopback (guards against DNS
	// rebinding for a sidecar on loopback). A caller setting it should
	// also set AuthToken (`hindsight serve` insists).
	AllowRemote bool
	// AllowedHosts are the Host header values, beyond loopback names,
	// that requests may carry (a name, or name:port); others get 421.
	// Browsers' Origins are held to the same list (others get 403).
	AllowedHosts []string
	// MaxSessions bounds the sessions open at once (agent sessions and the
	// shared sessionless one); past it an initialize or a GET of /sse is
	// refused with 503 and a JSON-RPC error. 0: DefaultMaxSessions; <0:
	// no bound.
	MaxSessions int
	// MaxChildren bounds, in front of a CommandUpstream, the sessions and
	// so the server processes running at once. 0: DefaultMaxChildren;
	// <0: only MaxSessions.
	MaxChildren int
	// BodyTimeout bounds the reading of one request body, however slowly
	// the agent sends it; past it the request fails with 408. 0:
	// DefaultBodyTimeout; <0: no bound.
	BodyTimeout time.Duration
	// MaxBodyBytes bounds one POST body; 0: DefaultMaxMessageBytes.
	MaxBodyBytes int64
	// IdleTimeout ends a session that had no request and no open stream
	// for this long (an agent that left without DELETE); its upstream
	// session, or child, goes with it. 0: DefaultIdleTimeout; <0: never.
	IdleTimeout time.Duration
	// SessionEnded, when set, is called once for each agent session (one
	// the agent was given an Mcp-Session-Id or legacy SSE stream for)
	// after it ended: deleted by the agent, expired by IdleTimeout, closed
	// by the upstream, or ended by Close. It runs after the session's
	// upstream is closed; Close waits for it. It should not take long.
	// Sessionless (2026-07-28) requests do not call it.
	SessionEnded func(s *Session)

	mu          sync.Mutex
	open        int // sessions holding a slot (see reserve)
	sessions    map[string]*httpSession
	sessionless *httpSession
	closed      bool
	ending      sync.WaitGroup // sessions ending in the background
	janitor     sync.Once
	stop        chan struct{} // closed by Close; stops the janitor
}

// DefaultIdleTimeout is HTTPHandler.IdleTimeout's default.
const DefaultIdleTimeout = 30 * time.Minute

func (h *HTTPHandler) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

func (h *HTTPHandler) maxBody() int64 {
	if h.MaxBodyBytes > 0 {
		return h.MaxBodyBytes
	}
	return DefaultMaxMessageBytes
}

// ServeHTTP routes a request to the Streamable HTTP or the SSE transport.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.hostAllowed(r) {
		http.Error(w, "misdirected request: Host "+strconv.Quote(r.Host)+" is not this sidecar's (see --allowed-host)", http.StatusMisdirectedRequest)
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if !h.originAllowed(origin) {
			http.Error(w, "forbidden: Origin is not a loopback address nor an allowed host", http.StatusForbidden)
			return
		}
		if cors(w, r, origin) {
			return
		}
	}
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hindsight"`)
		http.Error(w, "unauthorized: this sidecar wants its bearer token", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/mcp", "/mcp/":
		switch r.Method {
		case http.MethodPost:
			h.post(w, r)
		case http.MethodGet:
			h.listen(w, r)
		case http.MethodDelete:
			h.delete(w, r)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	case "/sse":
		switch r.Method {
		case http.MethodGet:
			h.sseOpen(w, r)
		case http.MethodPost:
			h.sseMessage(w, r)
		default:
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	case "/message", "/messages":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.sseMessage(w, r)
	default:
		http.NotFound(w, r)
	}
}

// cors lets a browser client (such as the MCP Inspector) from an allowed
// origin use the sidecar, and answers its preflight requests; it reports
// whether it answered the request.
func cors(w http.ResponseWriter, r *http.Request, origin string) bool {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
		h.Set("Access-Control-Allow-Headers", req)
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// authorized checks the agent's bearer token in constant time.
func (h *HTTPHandler) authorized(r *http.Request) bool {
	if h.AuthToken == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	// Hash both so the comparison takes the same time whatever the length.
	a, b := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256([]byte(h.AuthToken))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// loopbackOrigin reports whether a browser's Origin names a loopback host.
// Requests without Origin (not from a browser) pass.
func loopbackOrigin(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newSession opens a session and its upstream session.
func (h *HTTPHandler) newSession(ctx context.Context, transport string, hdr http.Header, announce bool) (*httpSession, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("sidecar is shutting down")
	}
	h.mu.Unlock()
	// Sessions the agent holds, and any that costs a process, take a slot;
	// a sessionless request in front of an HTTP server ends with it.
	counted := announce || h.costlySessions()
	if counted {
		if err := h.reserve(); err != nil {
			return nil, err
		}
	}
	id := newSessionID()
	h.janitor.Do(h.startJanitor)
	s := &httpSession{
		h: h, id: id, transport: transport, done: make(chan struct{}), lastActive: time.Now(),
		waiters: make(map[string]*waiter), progress: make(map[string]*waiter), counted: counted,
	}
	s.conn = &Conn{
		Hooks:       h.Hooks,
		Session:     &Session{ID: id, Server: h.Server, Transport: transport, TaskID: h.TaskID},
		Logger:      h.logger(),
		HookTimeout: h.HookTimeout,
	}
	s.announced = announce
	up, err := h.Upstream.Dial(ctx, hdr, UpstreamSink{
		Message: s.fromServer,
		Closed: func(err error) {
			h.endSessionLater(s, err.Error())
		},
	})
	if err != nil {
		if counted {
			h.release()
		}
		return nil, err
	}
	s.up = up
	if announce {
		h.mu.Lock()
		if h.closed { // Close ran meanwhile and did not see this one
			h.mu.Unlock()
			s.end("the sidecar is shutting down")
			return nil, errors.New("sidecar is shutting down")
		}
		if h.sessions == nil {
			h.sessions = make(map[string]*httpSession)
		}
		h.sessions[id] = s
		h.mu.Unlock()
	}
	h.logger().Log(ctx, s.logLevel(), "session opened", "session", id, "transport", transport)
	return s, nil
}

// costlySessions reports whether an upstream session costs a process.
func (h *HTTPHandler) costlySessions() bool {
	_, ok := h.Upstream.(*CommandUpstream)
	return ok
}

func (h *HTTPHandler) session(id string) *httpSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[id]
}

// shared returns the session of sessionless requests, opening it once.
func (h *HTTPHandler) shared(ctx context.Context, hdr http.Header) (*httpSession, error) {
	h.mu.Lock()
	if s := h.sessionless; s != nil {
		h.mu.Unlock()
		return s, nil
	}
	h.mu.Unlock()
	s, err := h.newSession(ctx, TransportStreamable, hdr, false)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessionless != nil { // lost a race: keep the first
		h.ending.Add(1)
		go func() {
			defer h.ending.Done()
			s.end("duplicate")
		}()
		return h.sessionless, nil
	}
	h.sessionless = s
	return s, nil
}

// forget drops s from the handler's tables; h.mu is held.
func (h *HTTPHandler) forget(s *httpSession) {
	if h.sessions[s.id] == s {
		delete(h.sessions, s.id)
	}
	if h.sessionless == s {
		h.sessionless = nil
	}
}

// endSession forgets s, fails its pending requests and closes its upstream.
func (h *HTTPHandler) endSession(s *httpSession, reason string) {
	h.mu.Lock()
	h.forget(s)
	h.mu.Unlock()
	if s.end(reason) {
		h.logger().Log(context.Background(), s.logLevel(), "session ended", "session", s.id, "reason", reason)
		if s.announced && h.SessionEnded != nil {
			h.SessionEnded(s.conn.Session)
		}
	}
}

// endSessionLater forgets s at once and ends it in the background: closing
// an upstream session can take a child's grace period. Close waits for it.
func (h *HTTPHandler) endSessionLater(s *httpSession, reason string) {
	h.mu.Lock()
	h.forget(s)
	if h.closed {
		h.mu.Unlock()
		h.endSession(s, reason) // Close is waiting for it anyway
		return
	}
	h.ending.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.ending.Done()
		h.endSession(s, reason)
	}()
}

// Close ends every session, closing their upstream sessions (children are
// stopped), and refuses new ones. Streams to agents end.
func (h *HTTPHandler) Close() error {
	h.janitor.Do(func() {}) // no janitor from now on
	h.mu.Lock()
	if h.stop != nil && !h.closed {
		close(h.stop)
	}
	h.closed = true
	all := make([]*httpSession, 0, len(h.sessions)+1)
	for _, s := range h.sessions {
		all = append(all, s)
	}
	if h.sessionless != nil {
		all = append(all, h.sessionless)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.endSession(s, "the sidecar is shutting down")
		}()
	}
	wg.Wait()
	h.ending.Wait()
	return nil
}

// startJanitor ends idle sessions until Close.
func (h *HTTPHandler) startJanitor() {
	idle := h.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	if idle < 0 {
		return
	}
	h.mu.Lock()
	h.stop = make(chan struct{})
	stop := h.stop
	h.mu.Unlock()
	every := min(max(idle/4, 10*time.Millisecond), time.Minute)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				h.mu.Lock()
				var expired []*httpSession
				for _, s := range h.sessions {
					if s.idle(now, idle) {
						expired = append(expired, s)
					}
				}
				if s := h.sessionless; s != nil && s.idle(now, idle) {
					expired = append(expired, s)
				}
				h.mu.Unlock()
				for _, s := range expired {
					h.endSessionLater(s, "idle for "+idle.String())
				}
			}
		}
	}()
}

// readBody reads a POST body up to the limit, answering the agent itself
// when it cannot.
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	lift := h.bodyDeadline(w)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody()))
	lift()
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			writeJSON(w, http.StatusRequestEntityTooLarge, ErrorResponse(nil, CodeInvalidRequest, "message too large"))
		case isTimeout(err):
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusRequestTimeout, ErrorResponse(nil, CodeInvalidRequest, "request body not received within "+h.bodyTimeout().String()))
		default:
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		}
		return nil, false
	}
	return body, true
}

func writeJSON(w http.ResponseWriter, status int, msg []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(msg)
}

// acceptsSSE reports whether the agent takes an event stream.
func acceptsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			if mt == "text/event-stream" || mt == "*/*" || mt == "text/*" {
				return true
			}
		}
	}
	return false
}
