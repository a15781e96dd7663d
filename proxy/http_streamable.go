package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
)

// keepAlive is how often an idle agent stream gets an SSE comment, so that
// intermediaries do not time it out.
const keepAlive = 25 * time.Second

// post handles a POST to /mcp: one JSON-RPC message from the agent.
func (h *HTTPHandler) post(w http.ResponseWriter, r *http.Request) {
	body, release, ok := h.readBody(w, r)
	if !ok {
		return
	}
	defer release()
	m := peek(body) // the Conn validates it
	isInit := m.Kind == KindRequest && m.Method == "initialize"
	var s *httpSession
	var err error
	switch sid := r.Header.Get("Mcp-Session-Id"); {
	case sid != "":
		if s = h.session(sid); s == nil {
			writeJSON(w, http.StatusNotFound, ErrorResponse(m.ID, CodeInvalidRequest, "session not found; initialize again"))
			return
		}
	case isInit:
		s, err = h.newSession(r.Context(), TransportStreamable, ForwardHeader(r.Header, h.AuthToken != ""), true)
		if err == nil {
			w.Header().Set("Mcp-Session-Id", s.id)
		}
	case h.costlySessions():
		// 2026-07-28 (server/discover and requests without a session) in
		// front of a child: one shared child, one request at a time, so
		// that equal ids of different agents cannot meet.
		if s, err = h.shared(r.Context(), ForwardHeader(r.Header, h.AuthToken != "")); err == nil {
			s.serial.Lock()
			defer s.serial.Unlock()
		}
	default:
		// 2026-07-28 in front of an HTTP server: a session of its own for
		// this one request, which costs nothing upstream.
		if s, err = h.newSession(r.Context(), TransportStreamable, ForwardHeader(r.Header, h.AuthToken != ""), false); err == nil {
			defer h.endSession(s, "sessionless request answered")
		}
	}
	if err != nil {
		writeJSON(w, h.errorStatus(w, err), ErrorResponse(m.ID, CodeServerUnavailable, err.Error()))
		return
	}
	out := s.post(w, r, body, m)
	if isInit && !gjson.GetBytes(out, "result").Exists() {
		h.endSession(s, "initialize failed")
	}
}

// post relays one agent message, body (m as peek read it), and answers
// the POST. It returns the response delivered to the agent, if any.
func (s *httpSession) post(w http.ResponseWriter, r *http.Request, body []byte, m Message) []byte {
	s.touch()
	act := s.conn.FromClient(body)
	switch {
	case act.Reply != nil:
		writeJSON(w, http.StatusOK, act.Reply)
		return act.Reply
	case act.Local != nil:
		out := act.Local(r.Context())
		writeJSON(w, http.StatusOK, out)
		return out
	case act.Forward == nil:
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	if !sameSlice(act.Forward, body) {
		m = peek(act.Forward)
	}
	if m.Kind == KindRequest {
		return s.request(w, r, m, act.Forward)
	}
	if m.Method == "notifications/cancelled" {
		defer s.dropCancelled(act.Forward)
	}
	reply, err := s.send(r, act.Forward)
	if err != nil {
		s.h.logger().Warn("upstream refused a message", "session", s.id, "method", m.Method, "err", err)
		status := s.h.errorStatus(w, err)
		if status == http.StatusOK {
			status = http.StatusBadGateway
			var se *StatusError
			if errors.As(err, &se) {
				status = se.Code
			}
		}
		out := ErrorResponse(nil, CodeServerUnavailable, err.Error())
		s.failBatch(act.Batch, out, err.Error())
		writeJSON(w, status, out)
		return nil
	}
	if reply != nil && reply.failed() { // the server's JSON-RPC error: as it came
		defer reply.Close()
		msg, _ := reply.Next()
		s.failBatch(act.Batch, msg, fmt.Sprintf("upstream HTTP %d", reply.Status))
		copyReplyHeader(w.Header(), reply.Header)
		writeJSON(w, reply.Status, msg)
		return nil
	}
	if reply != nil && bytes.HasPrefix(bytes.TrimLeft(act.Forward, " \t\r\n"), []byte("[")) {
		s.relayBatch(w, reply) // a batch (spec 2025-03-26): its answers come back here
		// The reply is all the upstream says about the batch: a request
		// it left unanswered will never be.
		s.failBatch(act.Batch, nil, "the upstream's reply to the batch did not answer this request"+from(reply.URL))
		return nil
	}
	if reply != nil { // not expected for a notification or response; pass on what it says
		for {
			msg, err := reply.Next()
			if err != nil {
				break
			}
			s.fromServer(msg)
		}
		reply.Close()
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// sameSlice reports whether a and b are the same bytes in memory.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// send passes one agent message upstream. An upstream error status with a
// JSON-RPC body comes back as a failed Reply, to relay as it came, except
// that a refusal of the sidecar's own credentials (AuthToken set: the
// agent's were not forwarded, and it could not mend them) comes back as
// a *StatusError.
func (s *httpSession) send(r *http.Request, msg []byte) (*Reply, error) {
	var hdr http.Header
	if _, child := s.up.(*cmdSession); !child { // a child has no use for them
		hdr = ForwardHeader(r.Header, s.h.AuthToken != "")
	}
	reply, err := s.up.Send(r.Context(), msg, hdr)
	if err != nil || reply == nil || !reply.failed() || s.h.AuthToken == "" ||
		(reply.Status != http.StatusUnauthorized && reply.Status != http.StatusForbidden) {
		return reply, err
	}
	defer reply.Close()
	body, _ := reply.Next()
	return nil, &StatusError{Code: reply.Status, Message: gjson.GetBytes(body, "error.message").String(), Header: reply.Header, URL: reply.URL}
}

// fail answers the agent's request id in place of the server, with a
// JSON-RPC error saying why, and records the request as failed. It
// returns the error response.
func (s *httpSession) fail(id json.RawMessage, why string) []byte {
	out := ErrorResponse(id, CodeServerUnavailable, why)
	s.conn.Fail(id, out, why)
	return out
}

// failBatch ends the requests of a batch (ids) still in flight with resp,
// the answer relayed for the whole batch (nil: none), and failure as the
// reason: their exchanges are recorded, and their ids free again.
func (s *httpSession) failBatch(ids []json.RawMessage, resp []byte, failure string) {
	for _, id := range ids {
		s.conn.Fail(id, resp, failure)
	}
}

// relayBatch passes the upstream's reply to a batch on as it came.
func (s *httpSession) relayBatch(w http.ResponseWriter, reply *Reply) {
	defer reply.Close()
	copyReplyHeader(w.Header(), reply.Header)
	if !reply.Stream {
		msg, err := reply.Next()
		if err != nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		writeJSON(w, reply.Status, s.conn.FromServer(msg))
		return
	}
	sw := startSSE(w)
	relayEvents(reply, func(ev *sseEvent) bool {
		if !ev.message() {
			return false
		}
		out := s.conn.FromServer(ev.Data)
		return out != nil && sw.Send("message", out) != nil
	})
}

// relayEvents reads the events of a stream reply and hands each to step,
// until step says stop (it returns nil) or the stream ends (it returns
// why: io.EOF, or the read's error).
func relayEvents(reply *Reply, step func(ev *sseEvent) (stop bool)) error {
	for {
		ev, err := reply.nextEvent()
		if err != nil {
			return err
		}
		if step(&ev) {
			return nil
		}
	}
}

// request forwards a request and answers the POST with the server's
// messages for it, ending with its response.
func (s *httpSession) request(w http.ResponseWriter, r *http.Request, m Message, fwd []byte) []byte {
	var token string
	if bytes.Contains(fwd, progressTokenMember) {
		token = gjson.GetBytes(fwd, "params._meta.progressToken").Raw
	}
	stream := acceptsSSE(r)
	var log *eventLog
	if stream && s.answersBySink() {
		// The sidecar is the stream's origin: what is routed to the
		// request goes straight into the stream's log, from which tail
		// writes it.
		log = s.newLog(false)
	}
	wt := s.addWaiter(m.ID, token, stream, log)
	reply, err := s.send(r, fwd)
	switch {
	case log != nil && (err != nil || reply != nil):
		s.removeWaiter(wt)
		log.finish()
		log = nil
	case log == nil && err == nil && reply == nil && stream:
		// An HTTP upstream that answers on its own stream: the
		// sidecar is this stream's origin too.
		if log = s.newLog(false); log != nil {
			go s.collect(wt, log) // removes wt
		}
	}
	if log == nil {
		defer s.removeWaiter(wt)
	}
	var se *StatusError
	gone := errors.As(err, &se) && se.Code == http.StatusNotFound || reply != nil && reply.Status == http.StatusNotFound
	if gone && s.h.session(s.id) == s {
		// The upstream forgot the session: so does the sidecar, once the
		// agent got the 404 (and its request was recorded as it went).
		defer s.h.endSessionLater(s, "the upstream answered 404: it forgot the session")
	}
	if err != nil {
		s.h.logger().Warn("upstream request failed", "session", s.id, "method", m.Method, "err", err)
		out := s.fail(m.ID, err.Error())
		writeJSON(w, s.h.errorStatus(w, err), out)
		return out
	}
	if reply != nil {
		return s.relayReply(w, r, m, reply)
	}
	if log != nil {
		sw := openSSE(w)
		sw.hold = holdFirst
		s.prime(sw, log)
		return s.tail(sw, r, log, 1, m.ID)
	}
	return s.await(w, r, wt)
}

// errorStatus is the HTTP status of the JSON-RPC error that stands in for
// an upstream failure: 200, except that an upstream's 401 or 403 reaches
// an agent whose own credentials were forwarded as it was, with its
// WWW-Authenticate challenge, so that the agent can authorize again; and a
// session refused for the session limit is 503 with Retry-After.
func (h *HTTPHandler) errorStatus(w http.ResponseWriter, err error) int {
	if errors.Is(err, ErrSessionLimit) {
		w.Header().Set("Retry-After", "5")
		return http.StatusServiceUnavailable
	}
	var se *StatusError
	if h.AuthToken != "" || !errors.As(err, &se) || (se.Code != http.StatusUnauthorized && se.Code != http.StatusForbidden) {
		return http.StatusOK
	}
	for _, v := range se.Header.Values("WWW-Authenticate") {
		w.Header().Add("WWW-Authenticate", v)
	}
	return se.Code
}

// relayReply passes the upstream's reply to a request on, as JSON or as an
// event stream like the upstream's, each message through the Conn and each
// event with its id and retry fields. An error status with a JSON-RPC body
// reaches the agent as it came. A JSON answer to another id stands for a
// JSON-RPC error naming the upstream. A stream the server closes before
// the response, after giving its events ids, was closed to be polled
// (SEP-1699): the agent's stream ends too, and the agent resumes it with
// Last-Event-ID (see resume); other ends stand for a JSON-RPC error.
func (s *httpSession) relayReply(w http.ResponseWriter, r *http.Request, m Message, reply *Reply) []byte {
	defer reply.Close()
	copyReplyHeader(w.Header(), reply.Header)
	if !reply.Stream {
		msg, _ := reply.Next()
		switch {
		case reply.failed():
			out := s.conn.FromServer(msg)
			if !isResponseTo(out, m.ID) { // an error about the request as a whole (id null)
				s.conn.Fail(m.ID, out, fmt.Sprintf("upstream HTTP %d", reply.Status))
			}
			writeJSON(w, reply.Status, out)
			return out
		case !isResponseTo(msg, m.ID):
			s.fromServer(msg) // whoever it is for
			why := fmt.Sprintf("upstream answered request %s with a message that is not its response (id %s)%s",
				m.ID, orNull(gjson.GetBytes(msg, "id").Raw), from(reply.URL))
			s.h.logger().Warn("upstream answered with another id", "session", s.id, "method", m.Method, "id", string(m.ID))
			out := s.fail(m.ID, why)
			writeJSON(w, http.StatusOK, out)
			return out
		}
		out := s.conn.FromServer(msg)
		writeJSON(w, http.StatusOK, out)
		return out
	}
	sw := startSSE(w)
	resumable := false
	var resp []byte
	err := relayEvents(reply, func(ev *sseEvent) bool {
		resumable = resumable || ev.ID != ""
		sent, err := s.relayEvent(sw, ev)
		if err == nil && sent && ev.message() && isResponseTo(ev.Data, m.ID) {
			resp = ev.Data
		}
		return err != nil || resp != nil
	})
	switch {
	case err == nil: // the response, or the agent's stream broke
		return resp
	case r.Context().Err() != nil:
		return nil // the agent left
	case resumable && errors.Is(err, io.EOF):
		return nil // closed to be polled: the request stays in flight
	}
	out := s.fail(m.ID, "upstream stream ended before the response: "+err.Error()+from(reply.URL))
	sw.Send("message", out)
	return out
}

func orNull(raw string) string {
	if raw == "" {
		return "null"
	}
	return raw
}

// await answers a request whose answer arrives through the session's
// router (stdio and legacy SSE upstreams).
func (s *httpSession) await(w http.ResponseWriter, r *http.Request, wt *waiter) []byte {
	var sw *sseWriter
	if wt.stream {
		sw = startSSE(w)
	}
	deliver := func(msg []byte) (bool, []byte) {
		resp := isResponseTo(msg, wt.id)
		switch {
		case sw != nil:
			if err := sw.Send("message", msg); err != nil {
				return true, nil
			}
		case resp:
			writeJSON(w, http.StatusOK, msg)
		}
		if resp {
			return true, msg
		}
		return false, nil
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case msg := <-wt.ch:
			if done, out := deliver(msg); done {
				return out
			}
		case <-tick.C:
			if sw != nil {
				sw.comment()
			}
		case <-r.Context().Done():
			return nil
		case <-s.done:
			return wt.drainEnded(deliver)
		}
	}
}

// listen serves GET /mcp: the agent's stream for server messages outside
// its requests.
func (h *HTTPHandler) listen(w http.ResponseWriter, r *http.Request) {
	s := h.namedSession(w, r, "session not found; initialize again")
	if s == nil {
		return
	}
	if !acceptsSSE(r) {
		http.Error(w, "Accept must include text/event-stream", http.StatusNotAcceptable)
		return
	}
	// A Last-Event-ID names an event of a stream the sidecar keeps, or
	// one of the HTTP upstream's.
	last := r.Header.Get("Last-Event-ID")
	old, n := s.findLog(last)
	if up, ok := s.up.(resumer); ok && last != "" && old == nil && up.Resumable() {
		s.resume(w, r, up, last)
		return
	}
	sw := startSSE(w)
	var log *eventLog
	if last != "" {
		switch {
		case old == nil:
			s.h.logger().Info("agent resumes a stream no longer kept; opening a new one", "session", s.id, "last_event_id", last)
		case !old.listening:
			s.tail(sw, r, old, n, nil) // a request stream: resumed to its end
			return
		default:
			if s.tail(sw, r, old, n, nil); r.Context().Err() != nil {
				return
			}
			log = old // go on as the listening stream it was
			log.reopen()
		}
	}
	if log == nil {
		if log = s.newLog(true); log != nil {
			s.prime(sw, log)
		}
	}
	l := s.addListener()
	defer s.removeListener(l)
	s.pump(sw, r, l, log)
}

// resume serves a GET with Last-Event-ID in front of an HTTP upstream: the
// upstream resumes its stream after that event (its event ids pass
// through the sidecar unchanged), and the events are relayed as they come,
// messages through the Conn.
func (s *httpSession) resume(w http.ResponseWriter, r *http.Request, up resumer, last string) {
	s.touch()
	defer s.touch()
	reply, err := up.Resume(r.Context(), last, ForwardHeader(r.Header, s.h.AuthToken != ""))
	if err != nil {
		s.h.logger().Warn("upstream refused to resume a stream", "session", s.id, "err", err)
		status := http.StatusBadGateway
		var se *StatusError
		if errors.As(err, &se) {
			status = se.Code
		}
		writeJSON(w, status, ErrorResponse(nil, CodeServerUnavailable, err.Error()))
		return
	}
	defer reply.Close()
	copyReplyHeader(w.Header(), reply.Header)
	if !reply.Stream { // the server's JSON-RPC error
		msg, _ := reply.Next()
		writeJSON(w, reply.Status, msg)
		return
	}
	sw := startSSE(w)
	relayEvents(reply, func(ev *sseEvent) bool {
		_, err := s.relayEvent(sw, ev)
		return err != nil
	})
}

// relayEvent writes an upstream event to the agent, its message (if it
// carries one) through the Conn. It reports whether it wrote the event:
// not when the Conn dropped its message.
func (s *httpSession) relayEvent(sw *sseWriter, ev *sseEvent) (bool, error) {
	if ev.message() {
		if ev.Data = s.conn.FromServer(ev.Data); ev.Data == nil {
			return false, nil
		}
	}
	return true, sw.SendEvent(ev)
}

// pump writes routed messages to an agent stream until it or the session
// ends.
func (s *httpSession) pump(sw *sseWriter, r *http.Request, l *waiter, log *eventLog) {
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	if log != nil {
		defer log.finish()
	}
	if sw.flush() != nil { // what was written before (a priming event)
		return
	}
	for {
		select {
		case msg := <-l.ch:
			ev := sseEvent{Event: "message", Data: msg, HasData: true}
			if log != nil {
				ev.ID = log.eventID(log.append(msg))
			}
			if err := sw.SendEvent(&ev); err != nil {
				return
			}
		case <-tick.C:
			if sw.comment() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
}

// delete serves DELETE /mcp: the agent ends its session.
func (h *HTTPHandler) delete(w http.ResponseWriter, r *http.Request) {
	s := h.namedSession(w, r, "session not found")
	if s == nil {
		return
	}
	h.endSessionLater(s, "the agent ended the session")
	w.WriteHeader(http.StatusOK)
}

// namedSession returns the session the request's Mcp-Session-Id names, or
// answers 400 (no header) or 404 with notFound and returns nil.
func (h *HTTPHandler) namedSession(w http.ResponseWriter, r *http.Request, notFound string) *httpSession {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		http.Error(w, "Mcp-Session-Id required", http.StatusBadRequest)
		return nil
	}
	s := h.session(sid)
	if s == nil {
		http.Error(w, notFound, http.StatusNotFound)
	}
	return s
}
