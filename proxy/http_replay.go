package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the event logs that make the sidecar's own streams
// resumable (see HTTPHandler.ReplayEvents).
const (
	DefaultReplayEvents = 64
	DefaultReplayAge    = 5 * time.Minute
)

// eventLog holds the recent events of one agent stream the sidecar is the
// origin of (in front of a command or legacy SSE upstream), so that an
// agent that lost the stream can resume it with Last-Event-ID. Events are
// numbered from 1 in the stream; their ids are "<stream>_<n>", and
// "<stream>_0" is the stream's priming event (streams are "hs1", "hs2"…
// in their session). The log keeps at most max
// events, none older than age.
type eventLog struct {
	stream    string
	listening bool // a GET stream's log, not a request stream's
	max       int
	age       time.Duration

	mu     sync.Mutex
	next   uint64 // the number of the next event
	events []loggedEvent
	done   bool          // no more events will come (until reopen)
	last   time.Time     // the last event, or the end of the last writer
	wake   chan struct{} // closed and replaced at every change
}

type loggedEvent struct {
	n    uint64
	data []byte
	at   time.Time
	resp bool // the response that ends a request stream
}

func newEventLog(stream string, listening bool, max int, age time.Duration) *eventLog {
	return &eventLog{stream: stream, listening: listening, max: max, age: age, next: 1, last: time.Now(), wake: make(chan struct{})}
}

// eventID is the id of event n of the log's stream.
func (l *eventLog) eventID(n uint64) string { return l.stream + "_" + strconv.FormatUint(n, 10) }

// parseEventID splits an id made by eventID.
func parseEventID(id string) (stream string, n uint64, ok bool) {
	i := strings.LastIndexByte(id, '_')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	return id[:i], n, err == nil
}

// changed wakes the writers waiting on the log. l.mu is held.
func (l *eventLog) changed() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// trim drops the events past the bounds. l.mu is held.
func (l *eventLog) trim(now time.Time) {
	drop := max(0, len(l.events)-l.max)
	for drop < len(l.events) && now.Sub(l.events[drop].at) > l.age {
		drop++
	}
	if drop > 0 {
		clear(l.events[:drop])
		l.events = l.events[drop:]
	}
}

// append adds a message as the stream's next event and returns its number.
func (l *eventLog) append(msg []byte) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.put(msg, false)
}

// add adds a message as the stream's next event unless the stream has
// ended, and reports whether it did; resp, the response to the stream's
// request, ends it.
func (l *eventLog) add(msg []byte, resp bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return false
	}
	l.put(msg, resp)
	l.done = resp
	return true
}

// put adds an event and returns its number. l.mu is held.
func (l *eventLog) put(msg []byte, resp bool) uint64 {
	now := time.Now()
	n := l.next
	l.events = append(l.events, loggedEvent{n: n, data: msg, at: now, resp: resp})
	l.next++
	l.last = now
	l.trim(now)
	l.changed()
	return n
}

// finish marks the stream as ended: its writers stop once they sent all.
func (l *eventLog) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done, l.last = true, time.Now()
	l.changed()
}

// reopen lets a resumed listening stream go on with the log.
func (l *eventLog) reopen() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = false
}

// since returns the events numbered from n on that the log still holds,
// whether the stream has ended, and a channel closed at the next change.
func (l *eventLog) since(n uint64) ([]loggedEvent, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trim(time.Now())
	i := 0
	for i < len(l.events) && l.events[i].n < n {
		i++
	}
	return l.events[i:len(l.events):len(l.events)], l.done, l.wake
}

// ended reports whether the log's stream has ended.
func (l *eventLog) ended() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// stale reports whether the log can go: its stream ended longer ago than
// age.
func (l *eventLog) stale(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done && now.Sub(l.last) > l.age
}

func (h *HTTPHandler) replayEvents() int {
	if h.ReplayEvents == 0 {
		return DefaultReplayEvents
	}
	return h.ReplayEvents
}

func (h *HTTPHandler) replayAge() time.Duration {
	if h.ReplayAge > 0 {
		return h.ReplayAge
	}
	return DefaultReplayAge
}

// endedKept is how many ended request streams of a session keep their
// logs (the most recent), beyond the age bound: an agent resumes a stream
// it lost while the request was in flight, soon after, and a session
// making calls quickly ends thousands within the replay age.
const endedKept = 16

// sweepEvery is the share of the replay age after which newLog looks for
// stale logs again: a sweep visits every log, and a session's request
// streams number in the thousands when calls come fast.
const sweepEvery = 8

// newLog opens the event log of a new stream of s (a listening one or a
// request's), or returns nil when the sidecar keeps none; logs of streams
// that ended long ago go (swept every replay age / sweepEvery; findLog no
// longer finds a stale log in between).
func (s *httpSession) newLog(listening bool) *eventLog {
	if s.h.replayEvents() < 0 {
		return nil
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.swept) >= s.h.replayAge()/sweepEvery {
		s.swept = now
		for id, l := range s.logs {
			if l.stale(now) {
				delete(s.logs, id)
			}
		}
	}
	if s.logs == nil {
		s.logs = make(map[string]*eventLog)
	}
	s.streamSeq++
	l := newEventLog("hs"+strconv.FormatUint(s.streamSeq, 10), listening, s.h.replayEvents(), s.h.replayAge())
	s.logs[l.stream] = l
	if !listening {
		s.requestLogs = append(s.requestLogs, l)
		if len(s.requestLogs) > 2*endedKept {
			s.trimEnded()
		}
	}
	return l
}

// trimEnded drops the logs of the ended request streams past the
// endedKept most recent; the logs of streams still open stay. s.mu is
// held.
func (s *httpSession) trimEnded() {
	ended := make([]bool, len(s.requestLogs))
	drop := -endedKept
	for i, l := range s.requestLogs {
		if ended[i] = l.ended(); ended[i] {
			drop++
		}
	}
	kept := s.requestLogs[:0]
	for i, l := range s.requestLogs {
		switch {
		case s.logs[l.stream] != l: // swept as stale
		case ended[i] && drop > 0:
			drop--
			delete(s.logs, l.stream)
		default:
			kept = append(kept, l)
		}
	}
	clear(s.requestLogs[len(kept):])
	s.requestLogs = kept
}

// findLog returns the log an agent's Last-Event-ID names, and the number
// of the first event to send again.
func (s *httpSession) findLog(lastID string) (*eventLog, uint64) {
	stream, n, ok := parseEventID(lastID)
	if !ok {
		return nil, 0
	}
	s.mu.Lock()
	l := s.logs[stream]
	s.mu.Unlock()
	if l == nil || l.stale(time.Now()) {
		return nil, 0
	}
	return l, n + 1
}

// collect moves what is routed to wt, a request stream whose log l was
// opened after its request was sent (an HTTP upstream that answered it
// on its own stream), into l until the request's response, the
// session's end, or the request's end without a response (the agent
// cancelled it); then it removes wt. It runs whether or not the agent is
// still reading the stream.
func (s *httpSession) collect(wt *waiter, l *eventLog) {
	defer s.removeWaiter(wt)
	defer l.finish()
	deliver := func(msg []byte) (bool, []byte) {
		resp := isResponseTo(msg, wt.id)
		l.add(msg, resp)
		return resp, nil
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case msg := <-wt.ch:
			if done, _ := deliver(msg); done {
				return
			}
		case <-tick.C:
			if !s.conn.inFlight(wt.id) {
				return
			}
		case <-s.done:
			wt.drainEnded(deliver)
			return
		}
	}
}

// tail writes l's events numbered from n on to the agent as they come,
// until the stream ends (once its response to id, if any, was written),
// the agent leaves or the session ends. It returns the response to id it
// wrote, if any. It flushes before it waits for more; what it wrote last
// is left for the handler's end to send with the end of the stream (or
// for the caller to flush), in one write.
func (s *httpSession) tail(sw *sseWriter, r *http.Request, l *eventLog, n uint64, id json.RawMessage) []byte {
	// The keep-alive ticker starts on the first wait that is not the
	// first flush's hold: most streams end without one.
	var tick *time.Ticker
	var tickC <-chan time.Time
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	ended := s.done
	for {
		evs, done, wake := l.since(n)
		for _, e := range evs {
			if sw.queue(&sseEvent{Event: "message", ID: l.eventID(e.n), Data: e.data, HasData: true}) != nil {
				return nil
			}
			n = e.n + 1
			if id != nil && e.resp {
				return e.data
			}
		}
		if done {
			return nil
		}
		var hold <-chan time.Time
		if sw.hold > 0 && sw.pending {
			// The headers and the priming event wait a moment for the
			// response, to leave with it in one write.
			t := time.NewTimer(sw.hold)
			defer t.Stop()
			hold, sw.hold = t.C, 0
		} else if sw.flush() != nil {
			return nil
		}
		if tick == nil && hold == nil {
			tick = time.NewTicker(keepAlive)
			tickC = tick.C
		}
		select {
		case <-hold:
			if sw.flush() != nil {
				return nil
			}
		case <-wake:
		case <-tickC:
			if sw.comment() != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-ended:
			ended = nil // the log's writer finishes it: send what it got
		}
	}
}

// prime writes a stream's priming event (its id, empty data: SEP-1699), so
// that the agent can resume the stream before its first message, to an
// agent of protocol 2025-11-25 or later.
func (s *httpSession) prime(sw *sseWriter, l *eventLog) {
	if _, _, v := s.conn.Session.Client(); v >= "2025-11-25" {
		sw.queue(&sseEvent{ID: l.eventID(0), HasData: true})
	}
}
