package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"sync"
	"time"
)

// sessionTable is an HTTPHandler's record of its open sessions and the
// slots they hold; the handler's methods below open sessions and end them
// (on DELETE, when the upstream ends them, when idle, at Close).
type sessionTable struct {
	mu          sync.Mutex
	open        int // sessions holding a slot (see reserve)
	sessions    map[string]*httpSession
	sessionless *httpSession
	closed      bool
	ending      sync.WaitGroup // sessions ending in the background
	janitor     sync.Once
	stop        chan struct{} // closed by Close; stops the janitor
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newSession opens a session and its upstream session.
func (h *HTTPHandler) newSession(ctx context.Context, transport string, hdr http.Header, announce bool) (*httpSession, error) {
	h.table.mu.Lock()
	if h.table.closed {
		h.table.mu.Unlock()
		return nil, errors.New("sidecar is shutting down")
	}
	h.table.mu.Unlock()
	// Sessions the agent holds, and any that costs a process, take a slot;
	// a sessionless request in front of an HTTP server ends with it.
	counted := announce || h.costlySessions()
	if counted {
		if err := h.reserve(); err != nil {
			return nil, err
		}
	}
	id := newSessionID()
	h.table.janitor.Do(h.startJanitor)
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
		h.table.mu.Lock()
		if h.table.closed { // Close ran meanwhile and did not see this one
			h.table.mu.Unlock()
			s.end("the sidecar is shutting down")
			return nil, errors.New("sidecar is shutting down")
		}
		if h.table.sessions == nil {
			h.table.sessions = make(map[string]*httpSession)
		}
		h.table.sessions[id] = s
		h.table.mu.Unlock()
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
	h.table.mu.Lock()
	defer h.table.mu.Unlock()
	return h.table.sessions[id]
}

// shared returns the session of sessionless requests, opening it once.
func (h *HTTPHandler) shared(ctx context.Context, hdr http.Header) (*httpSession, error) {
	h.table.mu.Lock()
	if s := h.table.sessionless; s != nil {
		h.table.mu.Unlock()
		return s, nil
	}
	h.table.mu.Unlock()
	s, err := h.newSession(ctx, TransportStreamable, hdr, false)
	if err != nil {
		return nil, err
	}
	h.table.mu.Lock()
	defer h.table.mu.Unlock()
	if h.table.sessionless != nil { // lost a race: keep the first
		h.table.ending.Add(1)
		go func() {
			defer h.table.ending.Done()
			s.end("duplicate")
		}()
		return h.table.sessionless, nil
	}
	h.table.sessionless = s
	return s, nil
}

// forget drops s from the handler's tables; h.table.mu is held.
func (h *HTTPHandler) forget(s *httpSession) {
	if h.table.sessions[s.id] == s {
		delete(h.table.sessions, s.id)
	}
	if h.table.sessionless == s {
		h.table.sessionless = nil
	}
}

// endSession forgets s, fails its pending requests and closes its upstream.
func (h *HTTPHandler) endSession(s *httpSession, reason string) {
	h.table.mu.Lock()
	h.forget(s)
	h.table.mu.Unlock()
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
	h.table.mu.Lock()
	h.forget(s)
	if h.table.closed {
		h.table.mu.Unlock()
		h.endSession(s, reason) // Close is waiting for it anyway
		return
	}
	h.table.ending.Add(1)
	h.table.mu.Unlock()
	go func() {
		defer h.table.ending.Done()
		h.endSession(s, reason)
	}()
}

// Close ends every session, closing their upstream sessions (children are
// stopped), and refuses new ones. Streams to agents end.
func (h *HTTPHandler) Close() error {
	h.table.janitor.Do(func() {}) // no janitor from now on
	h.table.mu.Lock()
	if h.table.stop != nil && !h.table.closed {
		close(h.table.stop)
	}
	h.table.closed = true
	all := make([]*httpSession, 0, len(h.table.sessions)+1)
	for _, s := range h.table.sessions {
		all = append(all, s)
	}
	if h.table.sessionless != nil {
		all = append(all, h.table.sessionless)
	}
	h.table.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.endSession(s, "the sidecar is shutting down")
		}()
	}
	wg.Wait()
	h.table.ending.Wait()
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
	h.table.mu.Lock()
	h.table.stop = make(chan struct{})
	stop := h.table.stop
	h.table.mu.Unlock()
	every := min(max(idle/4, 10*time.Millisecond), time.Minute)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				h.table.mu.Lock()
				var expired []*httpSession
				for _, s := range h.table.sessions {
					if s.idle(now, idle) {
						expired = append(expired, s)
					}
				}
				if s := h.table.sessionless; s != nil && s.idle(now, idle) {
					expired = append(expired, s)
				}
				h.table.mu.Unlock()
				for _, s := range expired {
					h.endSessionLater(s, "idle for "+idle.String())
				}
			}
		}
	}()
}
