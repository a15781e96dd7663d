package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// relay is the state of one Stdio.Run: it carries the agent's messages to
// the current child and the child's messages to the agent.
type relay struct {
	s     *Stdio
	name  string
	log   *slog.Logger
	grace time.Duration
	conn  *Conn
	// bare passes messages both ways as they are, unparsed and
	// untracked: the caller's Conn (an HTTP session's) validated the
	// agent's, keeps the requests in flight and fails them when the
	// child exits, and takes the child's. Only with NoRestart.
	bare bool

	agent  agentLink     // the agent's end
	route  childRoute    // the child that takes the agent's traffic
	locals localCalls    // requests the sidecar answers itself
	inMu   sync.Mutex    // serializes the agent's messages with reap
	stopCh chan struct{} // closed when the sidecar stops

	// starts counts the children started; only start touches it, on
	// Run's goroutine first and then on supervise's.
	starts   int
	crashLog rateLimit // crash and restart failures
	startLog rateLimit // restarts
	// exitErr says how the child exited, with NoRestart; set before
	// supervise returns.
	exitErr error
}

// messageWriter takes the messages for the agent: a LineWriter on the
// agent's stdout, or a sinkWriter handing them to an HTTP session.
type messageWriter interface {
	WriteMessage(msg []byte) error // one message, sent at once
	Buffer(msg []byte) error       // one message, sent by the next Flush
	Flush() error
}

// agentLink writes to the agent; its first failure stops the sidecar.
type agentLink struct {
	w    messageWriter
	gone chan struct{} // closed when writing to the agent failed
	once sync.Once
	err  error // why; set before gone is closed
}

// write writes one message to the agent.
func (a *agentLink) write(msg []byte) { a.failed(a.w.WriteMessage(msg)) }

// buffer adds one message to what flush writes.
func (a *agentLink) buffer(msg []byte) { a.failed(a.w.Buffer(msg)) }

// flush writes out what buffer added.
func (a *agentLink) flush() { a.failed(a.w.Flush()) }

func (a *agentLink) failed(err error) {
	if err != nil {
		a.once.Do(func() {
			a.err = err
			close(a.gone)
		})
	}
}

// childRoute says which child takes the agent's traffic: the current
// child, whether it is ready for it, the agent's messages held until it
// is, and the replayed initialize it must answer first.
type childRoute struct {
	mu       sync.Mutex
	cur      *child      // nil while no child runs
	ready    bool        // cur takes the agent's traffic
	held     [][]byte    // the agent's messages while no child is ready
	replayID []byte      // the id of the replayed initialize awaiting its answer
	replay   atomic.Bool // replayID is set: readChild looks for its answer
	seq      int         // replays so far, numbering their ids
}

// localCalls runs the handlers of the requests the sidecar answers itself,
// until Run stops taking new ones.
type localCalls struct {
	mu      sync.Mutex
	stopped bool // no new ones: WaitGroup.Add must not race Wait
	wg      sync.WaitGroup
}

// spawn runs f on a goroutine of its own, unless stop was called.
func (l *localCalls) spawn(f func()) {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return // Run is returning; the agent has gone
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// stop refuses new handlers and returns a channel closed once the running
// ones returned.
func (l *localCalls) stop() <-chan struct{} {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	return done
}

func (s *Stdio) newRelay(agentOut messageWriter) *relay {
	name := s.Server
	if name == "" {
		name = s.Command
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	sess := s.Session
	if sess == nil {
		sess = NewStdioSession(name)
		sess.TaskID = s.TaskID
	}
	grace := s.GracePeriod
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	return &relay{
		s: s, name: name, log: log, grace: grace,
		conn:   &Conn{Hooks: s.Hooks, Session: sess, Logger: log, HookTimeout: s.HookTimeout},
		agent:  agentLink{w: agentOut, gone: make(chan struct{})},
		stopCh: make(chan struct{}),
		crashLog: rateLimit{burst: 5, every: 30 * time.Second, flush: func(dropped int) {
			log.Error("server keeps exiting; restarting it with backoff", "server", name, "starts", s.Starts(), "crashes", s.Crashes(), "suppressed", dropped)
		}},
		startLog: rateLimit{burst: 5, every: 30 * time.Second, flush: func(dropped int) {
			log.Info("server restarted", "server", name, "starts", s.Starts(), "suppressed", dropped)
		}},
	}
}

// readAgent relays the agent's messages until agentIn ends. It returns nil
// at EOF.
func (r *relay) readAgent(ctx context.Context, agentIn io.Reader) error {
	lr := NewLineReader(agentIn, r.s.MaxLineBytes)
	var now time.Time
	waited := true
	for {
		line, err := lr.ReadLine()
		if waited {
			// Messages of one burst arrived with one read: they share
			// its time (time.Now is not free on every machine).
			now = time.Now()
		}
		var tooLong *LineTooLongError
		switch {
		case err == nil:
			if !blank(line) {
				r.fromAgent(ctx, line, now)
			}
		case errors.As(err, &tooLong):
			r.tooLong(tooLong)
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
		// A burst of messages goes to the server in one write; flush
		// before waiting for more.
		if waited = !lr.Pending(); waited {
			r.flushChild()
		}
	}
}

// maxLine is the limit on one message (Stdio.MaxLineBytes).
func (r *relay) maxLine() int {
	if r.s.MaxLineBytes > 0 {
		return r.s.MaxLineBytes
	}
	return MaxLineBytes
}

// tooLong answers an agent message over the size limit, which was
// skipped. Never silence: the agent is told, with the id when the
// message's first bytes show it (a notification is answered too, with a
// null id: its method cannot be read).
func (r *relay) tooLong(err *LineTooLongError) {
	r.log.Error("agent message too long; skipped", "server", r.name, "err", err)
	r.agent.write(ErrorResponse(err.ID(), CodeInvalidRequest, "Invalid Request: "+err.Error()))
}

// fromAgent relays one message from the agent. It holds inMu, so that a
// request is either failed by reap or held for the next child, never both.
func (r *relay) fromAgent(ctx context.Context, line []byte, now time.Time) {
	r.inMu.Lock()
	defer r.inMu.Unlock()
	if r.bare {
		r.send(line)
		return
	}
	a := r.conn.fromClientAt(line, now)
	switch {
	case a.Forward != nil:
		r.send(a.Forward)
	case a.Reply != nil:
		r.agent.write(a.Reply)
	case a.Local != nil:
		r.locals.spawn(func() {
			if out := a.Local(ctx); out != nil {
				r.agent.write(out)
			}
		})
	}
}

// send buffers a message from the agent for the child (readAgent flushes),
// or holds it until a child is ready.
func (r *relay) send(msg []byte) {
	r.route.mu.Lock()
	if r.route.cur == nil || !r.route.ready {
		r.route.held = append(r.route.held, msg)
		r.route.mu.Unlock()
		return
	}
	ch := r.route.cur
	r.route.mu.Unlock()
	if err := ch.in.Buffer(msg); err != nil {
		// The child is gone; its exit fails the request.
		r.log.Debug("write to server failed", "server", r.name, "err", err)
	}
}

// flushChild writes out what send buffered for the current child.
func (r *relay) flushChild() {
	r.route.mu.Lock()
	ch := r.route.cur
	r.route.mu.Unlock()
	if ch != nil {
		if err := ch.in.Flush(); err != nil {
			r.log.Debug("write to server failed", "server", r.name, "err", err)
		}
	}
}

// readChild relays the child's stdout to the agent.
func (r *relay) readChild(ch *child) {
	defer close(ch.outDone)
	lr := newLineReaderSize(ch.stdout, r.s.MaxLineBytes, r.s.bufSize())
	var now time.Time
	var b burst
	waited := true
	for {
		line, err := lr.ReadLine()
		if waited {
			now = time.Now() // the time of the read, as in readAgent
		}
		var tooLong *LineTooLongError
		switch {
		case err == nil:
			if !blank(line) {
				b.add(r.fromChild(ch, line, now))
			}
		case errors.As(err, &tooLong):
			r.log.Error("server message too long; skipped", "server", r.name, "err", err)
			// An answer the agent awaits (an id, no method) is replaced
			// by an error for the same id, so the request ends.
			if id := tooLong.ID(); id != nil && !gjson.GetBytes(tooLong.Head, "method").Exists() {
				resp := ErrorResponse(id, CodeInternalError, "the server's answer was dropped: "+err.Error())
				b.add(r.fromChild(ch, resp, now))
			}
		default:
			r.flushAgent(&b) // nothing is left: a burst ends before a wait
			return
		}
		// A burst of messages goes to the agent in one write, after the
		// Record hook recorded the exchanges it completes; flush before
		// waiting for more. The Exchange hook sees those exchanges after
		// that: the agent does not wait for it.
		if waited = !lr.Pending() || len(b.done) >= maxUnflushed; waited {
			r.flushAgent(&b)
		}
	}
}

// burst holds what a burst of the child's messages sends the agent, and
// the exchanges it completes, until flushAgent.
type burst struct {
	out  [][]byte    // the messages for the agent, in order
	done []*Exchange // the exchanges they complete
}

// add holds out (if any) for the agent and ex (if any) for the hooks.
func (b *burst) add(out []byte, ex *Exchange) {
	if out != nil {
		b.out = append(b.out, out)
	}
	if ex != nil {
		b.done = append(b.done, ex)
	}
}

// flushAgent has the exchanges of b recorded (Hooks.Record), so that no
// answer reaches the agent before its record, writes b's messages to the
// agent, then emits its exchanges, and empties b.
func (r *relay) flushAgent(b *burst) {
	r.conn.record(b.done)
	for i, msg := range b.out {
		r.agent.buffer(msg)
		b.out[i] = nil
	}
	r.agent.flush()
	for i, ex := range b.done {
		r.conn.emit(ex)
		b.done[i] = nil
	}
	b.out, b.done = b.out[:0], b.done[:0]
}

// maxUnflushed bounds the exchanges a burst of the child's messages
// completes before readChild flushes them to the agent and emits them.
const maxUnflushed = 256

// fromChild takes one message from the child: it returns what to send the
// agent for it and the exchange it completed, if any.
func (r *relay) fromChild(ch *child, line []byte, now time.Time) ([]byte, *Exchange) {
	if r.bare {
		return line, nil
	}
	if r.route.replay.Load() && r.isReplayAnswer(line) {
		if bytes.Contains(line, []byte(`"error"`)) {
			r.log.Warn("restarted server rejected the replayed initialize", "server", r.name, "response", truncate(string(line), 300))
		}
		_, initialized := r.conn.Handshake()
		go r.becomeReady(ch, initialized)
		return nil, nil
	}
	return r.conn.fromServerAt(line, now)
}

func blank(line []byte) bool {
	if len(line) > 0 && line[0] > ' ' {
		return false // every message but a whitespace-led one
	}
	return len(bytes.TrimSpace(line)) == 0
}
