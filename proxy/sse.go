package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"
)

// DefaultMaxMessageBytes bounds one JSON-RPC message read from an HTTP body,
// a server-sent event or a child's output line: well above the 64 MiB the
// sidecar promises to carry.
const DefaultMaxMessageBytes = 256 << 20

// errTooLarge reports a message above the size bound.
var errTooLarge = errors.New("message too large")

// sseEvent is one server-sent event.
type sseEvent struct {
	Event   string // the event type; "" means "message"
	ID      string // the id field, if any ("" when absent)
	Retry   string // the retry field (milliseconds), if any
	Data    []byte // the data lines joined with "\n"
	HasData bool   // the event had a data field (perhaps empty)
}

// message reports whether ev carries a message: data, of the default type.
func (ev *sseEvent) message() bool {
	return len(ev.Data) > 0 && (ev.Event == "" || ev.Event == "message")
}

// sseReader reads server-sent events (the text/event-stream format) of any
// size up to max bytes.
type sseReader struct {
	lines *LineReader
	max   int
}

func newSSEReader(r io.Reader, max int) *sseReader {
	if max <= 0 {
		max = DefaultMaxMessageBytes
	}
	return &sseReader{lines: NewLineReader(r, max), max: max}
}

// line returns the next line without its terminator ("\n" or "\r\n"). The
// slice is valid until the next call.
func (s *sseReader) line() ([]byte, error) {
	line, err := s.lines.read(false, false)
	var tooLong *LineTooLongError
	if errors.As(err, &tooLong) {
		return nil, errTooLarge
	}
	return bytes.TrimSuffix(line, []byte("\r")), err
}

// Next returns the next event that carries data, an id or a retry field:
// the priming event of a resumable stream (an id and empty data) and a
// bare retry field count. Comments, and events of other fields only, are
// skipped. An event cut off by the end of the stream is dropped, as the
// format says.
func (s *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data []byte
	lines, hasID := 0, false
	for {
		line, err := s.line()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if len(data) > 0 || hasID || ev.Retry != "" {
				ev.Data, ev.HasData = data, lines > 0
				return ev, nil
			}
			ev, data, lines, hasID = sseEvent{}, nil, 0, false
			continue
		}
		if line[0] == ':' {
			continue // comment (keep-alive)
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if lines > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
			lines++
			if len(data) > s.max {
				return sseEvent{}, errTooLarge
			}
		case "event":
			ev.Event = string(value)
		case "id":
			ev.ID, hasID = string(value), true
		case "retry":
			if isDigits(value) {
				ev.Retry = string(value)
			}
		}
	}
}

// nextMessage returns the next event that carries a message (see
// sseEvent.message), skipping the others.
func (s *sseReader) nextMessage() (sseEvent, error) {
	for {
		ev, err := s.Next()
		if err != nil || ev.message() {
			return ev, err
		}
	}
}

// nextData returns the next event that carries data, of any type.
func (s *sseReader) nextData() (sseEvent, error) {
	for {
		ev, err := s.Next()
		if err != nil || len(ev.Data) > 0 {
			return ev, err
		}
	}
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// appendSSE appends one event carrying data to b. Data containing newlines
// is split over several data lines, which the reader joins back unchanged.
func appendSSE(b []byte, event string, data []byte) []byte {
	return appendEvent(b, &sseEvent{Event: event, Data: data, HasData: true})
}

// appendEvent appends ev to b: its event, id and retry fields, then its
// data lines, if it had any (an empty data field is kept as one).
func appendEvent(b []byte, ev *sseEvent) []byte {
	for _, f := range [...]struct{ name, value string }{{"event: ", ev.Event}, {"id: ", ev.ID}, {"retry: ", ev.Retry}} {
		if f.value != "" {
			b = append(b, f.name...)
			b = append(b, f.value...)
			b = append(b, '\n')
		}
	}
	if !ev.HasData && len(ev.Data) == 0 {
		return append(b, '\n')
	}
	data := ev.Data
	for {
		i := bytes.IndexByte(data, '\n')
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			b = append(b, '\n')
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		data = data[i+1:]
	}
	return append(b, '\n')
}

// sseWriter writes events to an agent. Send, SendEvent and comment flush
// at once; queue leaves an event in the response's buffer for the next
// flush (or the handler's end) to send, so that a stream whose events are
// ready together costs one write.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     []byte
	pending bool // written and not flushed
	// hold is how long the stream's first flush may wait for an event
	// to leave with (see holdFirst); 0 once it has waited.
	hold time.Duration
}

// holdFirst is how long a request stream's headers and priming event wait
// for the first message, so that a quick answer leaves in one write with
// them. The agent needs neither before a message: the priming event only
// lets it resume a stream cut before the first message.
const holdFirst = 20 * time.Millisecond

// startSSE sends the headers of an event stream.
func startSSE(w http.ResponseWriter) *sseWriter {
	s := openSSE(w)
	_ = s.flush()
	return s
}

// openSSE writes the headers of an event stream, for the first flush to
// send.
func openSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w), pending: true}
}

// Send writes one event and flushes it.
func (s *sseWriter) Send(event string, data []byte) error {
	return s.SendEvent(&sseEvent{Event: event, Data: data, HasData: true})
}

// SendEvent writes ev, with its id and retry fields, and flushes it.
func (s *sseWriter) SendEvent(ev *sseEvent) error {
	if err := s.queue(ev); err != nil {
		return err
	}
	return s.flush()
}

// queue writes ev without flushing it.
func (s *sseWriter) queue(ev *sseEvent) error {
	s.buf = appendEvent(s.buf[:0], ev)
	s.pending = true
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	if cap(s.buf) > 1<<20 {
		s.buf = nil // do not pin a large buffer for the stream's life
	}
	return nil
}

// flush sends what was written and not flushed yet, if anything.
func (s *sseWriter) flush() error {
	if !s.pending {
		return nil
	}
	s.pending = false
	return s.rc.Flush()
}

// comment writes a keep-alive comment and flushes it.
func (s *sseWriter) comment() error {
	if _, err := s.w.Write([]byte(": keep-alive\n\n")); err != nil {
		return err
	}
	s.pending = true
	return s.flush()
}
