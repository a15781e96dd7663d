package proxy

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/tidwall/gjson"
)

// sseOpen serves GET /sse: a legacy HTTP+SSE session (spec 2024-11-05). The
// first event names the endpoint for the agent's POSTs; every server
// message follows on this stream. The session ends with the stream.
func (h *HTTPHandler) sseOpen(w http.ResponseWriter, r *http.Request) {
	s, err := h.newSession(r.Context(), TransportSSE, ForwardHeader(r.Header, h.AuthToken != ""), true)
	if err != nil {
		h.logger().Warn("open upstream session", "err", err)
		status := h.errorStatus(w, err)
		if status == http.StatusOK {
			status = http.StatusBadGateway
		}
		http.Error(w, err.Error(), status)
		return
	}
	defer h.endSessionLater(s, "the agent closed its SSE stream")
	l := s.addListener()
	defer s.removeListener(l)
	sw := startSSE(w)
	if err := sw.Send("endpoint", []byte("/message?sessionId="+url.QueryEscape(s.id))); err != nil {
		return
	}
	s.pump(sw, r, l, nil)
}

// sseMessage serves a POST to the legacy message endpoint: it relays the
// message and answers 202 at once; answers travel on the SSE stream.
func (h *HTTPHandler) sseMessage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("sessionId")
	if id == "" {
		id = q.Get("session_id")
	}
	s := h.session(id)
	if s == nil || s.transport != TransportSSE {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	body, release, ok := h.readBody(w, r)
	if !ok {
		return
	}
	defer release()
	s.touch()
	act := s.conn.FromClient(body)
	switch {
	case act.Reply != nil:
		s.route(act.Reply)
	case act.Local != nil:
		ctx, cancel := s.context()
		go func() {
			defer cancel()
			if out := act.Local(ctx); out != nil {
				s.route(out)
			}
		}()
	case act.Forward != nil:
		s.sseForward(r, act.Forward)
	}
	w.WriteHeader(http.StatusAccepted)
	w.Write([]byte("Accepted"))
}

// sseForward sends one agent message upstream; the server's answers, and
// errors standing in for them, go to the agent's SSE stream.
func (s *httpSession) sseForward(r *http.Request, fwd []byte) {
	m := peek(fwd)
	ctx, cancel := s.context()
	reply, err := s.up.Send(ctx, fwd, ForwardHeader(r.Header, s.h.AuthToken != ""))
	if err != nil {
		cancel()
		s.h.logger().Warn("upstream refused a message", "session", s.id, "method", m.Method, "err", err)
		if m.Kind == KindRequest {
			s.route(s.fail(m.ID, err.Error()))
		}
		return
	}
	if reply == nil {
		cancel()
		return
	}
	if reply.failed() {
		defer cancel()
		s.sseRefused(m, reply)
		return
	}
	go func() {
		defer cancel()
		defer reply.Close()
		answered := m.Kind != KindRequest
		for {
			msg, err := reply.Next()
			if err != nil {
				if !answered && ctx.Err() == nil {
					s.route(s.fail(m.ID, "upstream stream ended before the response: "+err.Error()+from(reply.URL)))
				}
				return
			}
			if !answered && gjson.GetBytes(msg, "id").Raw == string(m.ID) && !gjson.GetBytes(msg, "method").Exists() {
				answered = true
			}
			s.fromServer(msg)
		}
	}()
}

// sseRefused passes on an upstream's error status with a JSON-RPC body to
// an agent of the legacy SSE transport, which has no status to get: an
// error for its request goes as it came; one that names no request (id
// null) would only confuse the agent, and stands for an error for its
// request saying what the upstream said. An error for a notification or
// response is logged.
func (s *httpSession) sseRefused(m Message, reply *Reply) {
	defer reply.Close()
	msg, _ := reply.Next()
	switch {
	case m.Kind != KindRequest:
		s.h.logger().Warn("upstream refused a message", "session", s.id, "method", m.Method, "status", reply.Status, "answer", truncate(string(msg), 200))
	case isResponseTo(msg, m.ID):
		s.fromServer(msg)
	default:
		why := fmt.Sprintf("upstream HTTP %d: %s%s", reply.Status, gjson.GetBytes(msg, "error.message").String(), from(reply.URL))
		s.route(s.fail(m.ID, why))
	}
}
