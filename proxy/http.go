package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
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
	AllowedHosts []string
	// AllowedOrigins are the browser Origins (scheme://host[:port]), beyond
	// the sidecar's own, that may use it (see originAllowed); requests
	// from other Origins get 403. Requests without Origin (not from a
	// browser) pass.
	AllowedOrigins []string
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
	// BodyBudget bounds the bytes of all the POST bodies in flight (read,
	// or being read, and not answered yet); a request whose body would go
	// over it is refused with 503 and Retry-After (see BodiesRefused). 0:
	// DefaultBodyBudget; <0: no bound.
	BodyBudget int64
	// IdleTimeout ends a session that had no request and no open stream
	// for this long (an agent that left without DELETE); its upstream
	// session, or child, goes with it. 0: DefaultIdleTimeout; <0: never.
	IdleTimeout time.Duration
	// ReplayEvents bounds the recent events kept per agent stream that the
	// sidecar is the origin of (in front of a command or legacy SSE
	// upstream: an HTTP upstream's streams are resumed by the upstream),
	// for an agent that resumes a stream with Last-Event-ID after losing
	// it. Such streams carry event ids, and a priming event for agents of
	// protocol 2025-11-25 on. 0: DefaultReplayEvents; <0: none kept, no
	// event ids.
	ReplayEvents int
	// ReplayAge bounds how long an event is kept for a resume, and how
	// long the log of a stream that ended stays; of a session's request
	// streams that ended, only the 16 most recent keep theirs. 0:
	// DefaultReplayAge.
	ReplayAge time.Duration
	// SessionEnded, when set, is called once for each agent session (one
	// the agent was given an Mcp-Session-Id or legacy SSE stream for)
	// after it ended: deleted by the agent, expired by IdleTimeout, closed
	// by the upstream, or ended by Close. It runs after the session's
	// upstream is closed; Close waits for it. It should not take long.
	// Sessionless (2026-07-28) requests do not call it.
	SessionEnded func(s *Session)

	table  sessionTable // the open sessions
	bodies bodyBudget   // the request bodies in flight
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
		if !h.originAllowed(r, origin) {
			http.Error(w, "forbidden: Origin "+strconv.Quote(origin)+" is not this sidecar's own (see --allowed-origin)", http.StatusForbidden)
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

// readBody reads a POST body up to the limit, within the budget for
// bodies in flight, answering the agent itself when it cannot. The caller
// calls release once the request is answered.
func (h *HTTPHandler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	limit := h.maxBody()
	if budget := h.bodyBudget(); r.ContentLength > limit || (budget > 0 && r.ContentLength > budget) {
		// Past the whole budget, waiting would not help either.
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusRequestEntityTooLarge, ErrorResponse(nil, CodeInvalidRequest, "message too large"))
		return nil, nil, false
	}
	lift := h.bodyDeadline(w)
	body, held, err := h.readBudgeted(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	lift()
	if err != nil {
		h.give(held)
		var tooBig *http.MaxBytesError
		switch {
		case errors.Is(err, errBodyBudget):
			h.refuseBody(w)
		case errors.As(err, &tooBig):
			writeJSON(w, http.StatusRequestEntityTooLarge, ErrorResponse(nil, CodeInvalidRequest, "message too large"))
		case isTimeout(err):
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusRequestTimeout, ErrorResponse(nil, CodeInvalidRequest, "request body not received within "+h.bodyTimeout().String()))
		default:
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		}
		return nil, nil, false
	}
	return body, func() { h.give(held) }, true
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
