package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// maxQueued bounds the server messages held for an agent that has no
// stream open to take them; past it the oldest are dropped (and logged).
const maxQueued = 1024

// httpSession is one agent session of the HTTP sidecar: its Conn, its
// upstream session and the agent's open streams.
type httpSession struct {
	h         *HTTPHandler
	id        string
	transport string
	conn      *Conn
	up        UpstreamSession
	done      chan struct{} // closed when the session ended
	endOnce   sync.Once
	announced bool       // the agent knows its id (not a sessionless one)
	counted   bool       // holds one of the handler's session slots
	serial    sync.Mutex // one request at a time in the shared sessionless session

	mu          sync.Mutex
	lastActive  time.Time            // the agent's last request or stream end
	waiters     map[string]*waiter   // request id → the POST waiting for its answer
	progress    map[string]*waiter   // progress token → the request stream that gets its progress
	streams     []*waiter            // open request streams, oldest first
	listeners   []*waiter            // open GET (or legacy SSE) streams, oldest first
	queue       [][]byte             // messages for a listener that is not there yet
	logs        map[string]*eventLog // the recent events of the streams the sidecar originates, by stream id
	requestLogs []*eventLog          // the logs of request streams among them, oldest first (see trimEnded)
	streamSeq   uint64               // the last stream id given
	swept       time.Time            // when newLog last dropped stale logs
}

// waiter is an open agent stream that server messages are routed to: a
// POST awaiting its answer, a GET listening stream or a legacy SSE stream.
type waiter struct {
	id     json.RawMessage // the request awaited; nil for a listener
	token  string          // its progress token
	stream bool            // an event stream: takes more than the answer
	// log, for a request stream the sidecar is the origin of, takes
	// what is routed to it directly (see toLog); ch and quit are nil.
	log     *eventLog
	ch      chan []byte
	quit    chan struct{} // closed when the stream is gone
	removed bool          // removeWaiter ran; guarded by the session's mu
}

// drainEnded hands deliver, once the session ended, what its end routed
// to wt before closing done, until deliver says the stream is done (a
// response), and otherwise the error that the session ended. It returns
// deliver's last answer.
func (wt *waiter) drainEnded(deliver func(msg []byte) (done bool, out []byte)) []byte {
	for {
		select {
		case msg := <-wt.ch:
			if done, out := deliver(msg); done {
				return out
			}
		default:
			_, out := deliver(ErrorResponse(wt.id, CodeServerUnavailable, "session ended"))
			return out
		}
	}
}

// logLevel is the level of the session's lifecycle logs: sessionless
// requests come and go with every call.
func (s *httpSession) logLevel() slog.Level {
	if s.announced {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// touch records the agent's activity.
func (s *httpSession) touch() {
	s.mu.Lock()
	s.lastActive = time.Now()
	s.mu.Unlock()
}

// idle reports whether the agent has left s alone for longer than d: no
// request in flight, no stream open, no request since.
func (s *httpSession) idle(now time.Time, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters) == 0 && len(s.listeners) == 0 && now.Sub(s.lastActive) > d
}

// fromServer takes one message the upstream sent outside a reply. As
// Conn.FromServer, the exchange a response completes is recorded before
// the response is routed; the Conn's parse names the request it answers.
func (s *httpSession) fromServer(raw []byte) {
	out, ex := s.conn.fromServerAt(raw, time.Now())
	if ex != nil {
		s.conn.record([]*Exchange{ex})
		s.conn.emit(ex)
		s.routeResponse(out, ex.key)
		return
	}
	if out != nil {
		s.route(out)
	}
}

// routeResponse delivers msg, the response to the agent's request of id
// key, to the POST awaiting it; without one, as route does.
func (s *httpSession) routeResponse(msg []byte, key string) {
	s.mu.Lock()
	w := s.waiters[key]
	if w == nil {
		s.mu.Unlock()
		s.route(msg)
		return
	}
	s.mu.Unlock()
	s.deliver(w, msg, true)
}

// route delivers a message for the agent to the stream that should carry
// it: the POST awaiting a response, the request stream of a progress
// token, else a listening stream, else an open request stream, else the
// queue. Responses no one awaits go to a listener or are dropped.
func (s *httpSession) route(msg []byte) {
	r := gjson.GetManyBytes(msg, "id", "method", "params.progressToken")
	isResp := r[0].Exists() && !r[1].Exists()
	s.mu.Lock()
	var w *waiter
	switch {
	case isResp:
		w = s.waiters[r[0].Raw]
	case r[1].Str == "notifications/progress" && r[2].Exists():
		w = s.progress[r[2].Raw]
	}
	resp := isResp && w != nil // the response of w's own request
	if w == nil && len(s.listeners) > 0 {
		w = s.listeners[0]
	}
	if w == nil && !isResp && len(s.streams) > 0 {
		w = s.streams[0]
	}
	if w == nil {
		if isResp {
			s.mu.Unlock()
			s.h.logger().Warn("dropped a response no one awaits", "session", s.id, "id", r[0].Raw)
			return
		}
		if len(s.queue) >= maxQueued {
			s.h.logger().Warn("agent has no stream open; dropped the oldest queued message", "session", s.id)
			s.queue = s.queue[1:]
		}
		s.queue = append(s.queue, msg)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.deliver(w, msg, resp)
}

// deliver hands msg to w's stream; resp says it is the response to w's
// request. A message for a stream that closed meanwhile goes to another,
// unless it is a response.
func (s *httpSession) deliver(w *waiter, msg []byte, resp bool) {
	if w.log != nil {
		if !s.toLog(w, msg, resp) && !resp {
			s.route(msg) // the stream ended under us: find another
		}
		return
	}
	select {
	case w.ch <- msg:
	case <-w.quit:
		if peek(msg).Kind != KindResponse {
			s.route(msg) // the stream closed under us: find another
		}
	case <-s.done:
	}
}

// toLog adds msg to the log of w, a request stream the sidecar is the
// origin of, whose writer (tail) sends it; the response to w's request
// ends the stream, and w, which is removed first, so that what is routed
// after finds another stream. It reports whether the stream still took
// msg.
func (s *httpSession) toLog(w *waiter, msg []byte, resp bool) bool {
	if resp {
		s.removeWaiter(w)
	}
	return w.log.add(msg, resp)
}

// endLogged ends the request streams of s the sidecar is the origin of
// that are still open, each with an error response saying why: the
// session ended.
func (s *httpSession) endLogged(why string) {
	s.mu.Lock()
	var open []*waiter
	for _, w := range s.waiters {
		if w.log != nil {
			open = append(open, w)
		}
	}
	s.mu.Unlock()
	for _, w := range open {
		s.toLog(w, ErrorResponse(w.id, CodeServerUnavailable, why), true)
	}
}

// dropCancelled ends the stream of the agent's request that the
// notifications/cancelled msg gave up on, if the sidecar is its origin:
// no response will come for it.
func (s *httpSession) dropCancelled(msg []byte) {
	id := gjson.GetBytes(msg, "params.requestId")
	if !id.Exists() {
		return
	}
	s.mu.Lock()
	w := s.waiters[id.Raw]
	s.mu.Unlock()
	if w != nil && w.log != nil && !s.conn.inFlight(w.id) {
		s.removeWaiter(w)
		w.log.finish()
	}
}

// answersBySink reports whether the upstream session answers requests
// through the session's sink (a child, a legacy SSE server) rather than
// in a Reply to Send.
func (s *httpSession) answersBySink() bool {
	switch s.up.(type) {
	case *cmdSession, *sseSession:
		return true
	}
	return false
}

// addWaiter registers a POST awaiting the answer to request id; with a
// log, its request stream's (see waiter.log).
func (s *httpSession) addWaiter(id json.RawMessage, token string, stream bool, log *eventLog) *waiter {
	w := &waiter{id: id, token: token, stream: stream, log: log}
	if log == nil {
		w.ch, w.quit = make(chan []byte, 64), make(chan struct{})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.waiters[string(id)]; old != nil {
		// The agent reused an id in flight: the answer can go to one
		// request only; the other learns why at once.
		why := ErrorResponse(old.id, CodeInvalidRequest, "request id "+string(id)+" reused while in flight")
		if old.log != nil {
			old.log.add(why, true)
		} else {
			select {
			case old.ch <- why:
			default:
			}
		}
	}
	s.waiters[string(id)] = w
	if stream {
		s.streams = append(s.streams, w)
		if token != "" {
			s.progress[token] = w
		}
	}
	return w
}

// removeWaiter ends w's registration; it may be called again.
func (s *httpSession) removeWaiter(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.removed {
		return
	}
	w.removed = true
	if s.waiters[string(w.id)] == w {
		delete(s.waiters, string(w.id))
	}
	if w.token != "" && s.progress[w.token] == w {
		delete(s.progress, w.token)
	}
	s.streams = without(s.streams, w)
	s.lastActive = time.Now()
	if w.quit != nil {
		close(w.quit)
	}
}

// addListener opens a listening stream; queued messages go to it first.
func (s *httpSession) addListener() *waiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &waiter{stream: true, ch: make(chan []byte, max(64, len(s.queue)+16)), quit: make(chan struct{})}
	for _, m := range s.queue {
		w.ch <- m
	}
	s.queue = nil
	s.listeners = append(s.listeners, w)
	return w
}

// removeListener closes a listening stream; what it did not send yet is
// queued again for the next one.
func (s *httpSession) removeListener(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = without(s.listeners, w)
	s.lastActive = time.Now()
	close(w.quit)
	var left [][]byte
drain:
	for {
		select {
		case m := <-w.ch:
			left = append(left, m)
		default:
			break drain
		}
	}
	s.queue = append(left, s.queue...)
}

func without(list []*waiter, w *waiter) []*waiter {
	for i, x := range list {
		if x == w {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// end fails the requests in flight, closes the agent's streams and the
// upstream session. It reports whether this call ended the session.
func (s *httpSession) end(reason string) bool {
	first := false
	s.endOnce.Do(func() {
		first = true
		for _, resp := range s.conn.FailPending(reason) {
			s.route(resp)
		}
		s.endLogged("session ended")
		close(s.done)
		if s.up != nil {
			if err := s.up.Close(); err != nil {
				s.h.logger().Warn("close upstream session", "session", s.id, "err", err)
			}
		}
		if s.counted { // after Close: a child holds its slot until it is gone
			s.h.release()
		}
	})
	return first
}

// context returns a context that ends with the session, for work that
// outlives the agent request that started it.
func (s *httpSession) context() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// peek classifies a message without validating it (the Conn does that),
// reading only its id and method.
func peek(msg []byte) Message {
	r := gjson.GetManyBytes(msg, "id", "method")
	m := Message{Raw: msg, Method: r[1].Str}
	if r[0].Exists() {
		m.ID = json.RawMessage(r[0].Raw)
	}
	switch {
	case r[1].Exists() && r[0].Exists():
		m.Kind = KindRequest
	case r[1].Exists():
		m.Kind = KindNotification
	case r[0].Exists():
		m.Kind = KindResponse
	}
	return m
}
