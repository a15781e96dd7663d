package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Defaults of Stdio's tunables.
const (
	DefaultGracePeriod     = 3 * time.Second
	DefaultMinRestartDelay = 250 * time.Millisecond
	DefaultMaxRestartDelay = 15 * time.Second
	DefaultReplayTimeout   = 10 * time.Second
)

// stableRun is how long a child must have run for its exit to count as a
// fresh crash rather than a crash loop: the restart delay starts over.
const stableRun = 30 * time.Second

// Stdio is the stdio transport: it runs an MCP server as a child process
// and relays newline-delimited JSON-RPC between the agent and the child's
// stdin and stdout through a Conn.
//
// The child runs in a process group of its own. Its stderr goes line by
// line to Logger, never to the agent. When the child exits on its own, every
// agent request in flight is answered with a JSON-RPC error naming the
// server and its exit status, and the child is started again after a
// capped, growing delay; the agent's initialize request and initialized
// notification are replayed to it (the replayed initialize's answer is
// swallowed), and messages that arrived meanwhile are delivered after.
type Stdio struct {
	Command string
	Args    []string
	Env     []string // the child's environment; nil: the sidecar's
	Dir     string   // the child's working directory; "": the sidecar's

	Server      string        // the server's name, for logs and errors; default: Command
	Hooks       *Hooks        // nil: relay only
	Logger      *slog.Logger  // nil: slog.Default()
	Session     *Session      // nil: a new stdio session (see NewStdioSession)
	HookTimeout time.Duration // see Conn.HookTimeout

	// GracePeriod is how long the child may take to exit after its stdin
	// is closed, and again after SIGTERM, before its process group is
	// killed. 0: DefaultGracePeriod.
	GracePeriod time.Duration
	// MinRestartDelay and MaxRestartDelay bound the exponential delay
	// before a crashed child is started again. 0: the defaults.
	MinRestartDelay time.Duration
	MaxRestartDelay time.Duration
	// ReplayTimeout bounds the wait for the answer to a replayed
	// initialize; after it, held messages are delivered anyway.
	ReplayTimeout time.Duration
	// MaxLineBytes limits one message in either direction (0: MaxLineBytes).
	MaxLineBytes int

	nStarts, nCrashes atomic.Int64 // see Starts
	lastCrash         atomic.Int64 // unix nanoseconds
}

// Starts returns how many times Run started the server (the first start
// and every restart), Crashes how many times it exited on its own, and
// LastCrash when it last did (zero when it never did): a crash loop shows
// in `hindsight status` even when its log lines are rate-limited.
func (s *Stdio) Starts() int64  { return s.nStarts.Load() }
func (s *Stdio) Crashes() int64 { return s.nCrashes.Load() }
func (s *Stdio) LastCrash() time.Time {
	if n := s.lastCrash.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// NewStdioSession returns the session of one stdio sidecar run: a random
// id, the agent host's pid (the sidecar's parent) and the explicit task id
// from HINDSIGHT_TASK_ID.
func NewStdioSession(server string) *Session {
	var b [12]byte
	rand.Read(b[:])
	return &Session{
		ID:        hex.EncodeToString(b[:]),
		Server:    server,
		Transport: "stdio",
		HostPID:   os.Getppid(),
		TaskID:    os.Getenv("HINDSIGHT_TASK_ID"),
	}
}

// Run starts the child and relays until the agent closes agentIn or ctx is
// done; then it closes the child's stdin, waits GracePeriod, sends SIGTERM
// to the child's process group, waits GracePeriod again and sends SIGKILL.
// It returns an error when the child cannot be started at all, or when
// reading from or writing to the agent fails.
func (s *Stdio) Run(ctx context.Context, agentIn io.Reader, agentOut io.Writer) error {
	r := s.newRelay(agentOut)
	first, err := r.start()
	if err != nil {
		return fmt.Errorf("start server %s: %w", r.name, err)
	}
	r.install(first)

	superDone := make(chan struct{})
	go func() {
		defer close(superDone)
		r.supervise(first)
	}()
	readDone := make(chan error, 1)
	localCtx, cancelLocal := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLocal()
	go func() { readDone <- r.readAgent(localCtx, agentIn) }()

	var runErr error
	select {
	case err := <-readDone:
		if err != nil {
			runErr = fmt.Errorf("read from agent: %w", err)
			r.log.Error("cannot read from the agent; stopping", "server", r.name, "err", err)
		} else {
			r.log.Info("agent closed stdin; stopping", "server", r.name)
		}
	case <-ctx.Done():
		r.log.Info("stopping", "server", r.name, "reason", context.Cause(ctx))
	case <-r.agentGone:
		runErr = fmt.Errorf("write to agent: %w", r.agentErr)
		r.log.Error("cannot write to the agent; stopping", "server", r.name, "err", r.agentErr)
	}
	close(r.stopCh)
	<-superDone
	r.crashLog.stop()
	r.startLog.stop()
	// Local handlers get a grace period to answer.
	r.mu.Lock()
	r.stopped = true // no new ones: WaitGroup.Add must not race Wait
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.locals.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(r.grace):
		cancelLocal()
	}
	return runErr
}

// relay is the state of one Stdio.Run.
type relay struct {
	s     *Stdio
	name  string
	log   *slog.Logger
	conn  *Conn
	agent *LineWriter
	grace time.Duration

	stopCh    chan struct{} // closed when the sidecar stops
	agentGone chan struct{} // closed when writing to the agent failed
	agentOnce sync.Once
	agentErr  error
	locals    sync.WaitGroup
	inMu      sync.Mutex // serializes the agent's messages with reap

	mu       sync.Mutex
	cur      *child   // nil while no child runs
	ready    bool     // cur takes the agent's traffic
	held     [][]byte // the agent's messages while no child is ready
	replayID []byte   // the id of the replayed initialize awaiting its answer
	replay   atomic.Bool
	seq      int
	stopped  bool // Run no longer starts local handlers
	starts   int  // children started

	crashLog rateLimit // crash and restart failures
	startLog rateLimit // restarts
}

func (s *Stdio) newRelay(agentOut io.Writer) *relay {
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
	}
	grace := s.GracePeriod
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	return &relay{
		s: s, name: name, log: log, grace: grace,
		conn:      &Conn{Hooks: s.Hooks, Session: sess, Logger: log, HookTimeout: s.HookTimeout},
		agent:     NewLineWriter(agentOut),
		stopCh:    make(chan struct{}),
		agentGone: make(chan struct{}),
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
			// Never silence: the agent is told, with the id when the
			// message's first bytes show it (a notification is
			// answered too, with a null id: its method cannot be read).
			r.log.Error("agent message too long; skipped", "server", r.name, "err", err)
			r.toAgent(ErrorResponse(tooLong.ID(), CodeInvalidRequest, "Invalid Request: "+err.Error()))
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

// fromAgent relays one message from the agent. It holds inMu, so that a
// request is either failed by reap or held for the next child, never both.
func (r *relay) fromAgent(ctx context.Context, line []byte, now time.Time) {
	r.inMu.Lock()
	defer r.inMu.Unlock()
	a := r.conn.fromClientAt(line, now)
	switch {
	case a.Forward != nil:
		r.send(a.Forward)
	case a.Reply != nil:
		r.toAgent(a.Reply)
	case a.Local != nil:
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return // Run is returning; the agent has gone
		}
		r.locals.Add(1)
		r.mu.Unlock()
		go func() {
			defer r.locals.Done()
			if out := a.Local(ctx); out != nil {
				r.toAgent(out)
			}
		}()
	}
}

// send buffers a message from the agent for the child (readAgent flushes),
// or holds it until a child is ready.
func (r *relay) send(msg []byte) {
	r.mu.Lock()
	if r.cur == nil || !r.ready {
		r.held = append(r.held, msg)
		r.mu.Unlock()
		return
	}
	ch := r.cur
	r.mu.Unlock()
	if err := ch.in.Buffer(msg); err != nil {
		// The child is gone; its exit fails the request.
		r.log.Debug("write to server failed", "server", r.name, "err", err)
	}
}

// flushChild writes out what send buffered for the current child.
func (r *relay) flushChild() {
	r.mu.Lock()
	ch := r.cur
	r.mu.Unlock()
	if ch != nil {
		if err := ch.in.Flush(); err != nil {
			r.log.Debug("write to server failed", "server", r.name, "err", err)
		}
	}
}

// toAgent writes one message to the agent. The first failure stops the
// sidecar.
func (r *relay) toAgent(msg []byte) {
	r.agentFailed(r.agent.WriteMessage(msg))
}

func (r *relay) agentFailed(err error) {
	if err != nil {
		r.agentOnce.Do(func() {
			r.agentErr = err
			close(r.agentGone)
		})
	}
}

// child is one run of the server process.
type child struct {
	cmd     *exec.Cmd
	pgid    int
	grp     *procGroup // its process group (Unix) or Job object (Windows)
	in      *LineWriter
	stdin   *os.File // our end of its stdin
	stdout  *os.File // our end of its stdout
	stderr  *os.File // our end of its stderr
	started time.Time
	exited  chan struct{} // closed after Wait
	outDone chan struct{} // closed when its stdout is drained
	errDone chan struct{} // closed when its stderr is drained
	state   *os.ProcessState
	waitErr error
}

// start starts a child and its readers.
func (r *relay) start() (*child, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(r.s.Command, r.s.Args...)
	cmd.Env, cmd.Dir = r.s.Env, r.s.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	prepareGroup(cmd)
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	ch := &child{
		cmd: cmd, grp: newGroup(cmd), pgid: cmd.Process.Pid, in: NewLineWriter(inW), stdin: inW, stdout: outR, stderr: errR,
		started: time.Now(), exited: make(chan struct{}), outDone: make(chan struct{}), errDone: make(chan struct{}),
	}
	r.mu.Lock()
	r.starts++
	n := r.starts
	r.mu.Unlock()
	r.s.nStarts.Add(1)
	if n == 1 {
		r.log.Info("server started", "server", r.name, "pid", ch.pgid, "command", r.s.Command)
	} else if ok, dropped := r.startLog.allow(); ok {
		r.log.Info("server restarted", "server", r.name, "pid", ch.pgid, "starts", n, "suppressed", dropped)
	}
	go func() {
		ch.waitErr = cmd.Wait()
		ch.state = cmd.ProcessState
		close(ch.exited)
	}()
	go r.readChild(ch)
	go r.logStderr(ch)
	return ch, nil
}

// install makes ch the current child. When the agent already initialized a
// session, its handshake is replayed first and the agent's traffic held
// until the child answered.
func (r *relay) install(ch *child) {
	initReq, initialized := r.conn.Handshake()
	r.mu.Lock()
	r.cur, r.ready = ch, false
	if initReq == nil {
		r.mu.Unlock()
		r.becomeReady(ch, nil)
		return
	}
	r.seq++
	id := []byte(fmt.Sprintf(`"hindsight-replay-%d"`, r.seq))
	replayed, err := sjson.SetRawBytes(initReq, "id", id)
	if err != nil {
		r.mu.Unlock()
		r.log.Error("replay initialize", "server", r.name, "err", err)
		r.becomeReady(ch, initialized)
		return
	}
	r.replayID = id
	r.replay.Store(true)
	r.mu.Unlock()
	r.log.Debug("replaying the agent's initialize to the restarted server", "server", r.name)
	if err := ch.in.WriteMessage(replayed); err != nil {
		r.log.Debug("write to server failed", "server", r.name, "err", err)
	}
	wait := r.s.ReplayTimeout
	if wait <= 0 {
		wait = DefaultReplayTimeout
	}
	time.AfterFunc(wait, func() {
		r.mu.Lock()
		late := r.cur == ch && !r.ready
		r.mu.Unlock()
		if late {
			r.log.Warn("restarted server did not answer the replayed initialize; delivering anyway", "server", r.name)
			r.becomeReady(ch, initialized)
		}
	})
}

// becomeReady sends the initialized notification (if any) and the held
// messages to ch, then lets the agent's traffic through. Holding mu while
// writing keeps the order: later messages wait behind the held ones.
func (r *relay) becomeReady(ch *child, initialized []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != ch || r.ready {
		return
	}
	r.replay.Store(false)
	r.replayID = nil
	var err error
	if initialized != nil {
		err = ch.in.WriteMessage(initialized)
	}
	for _, m := range r.held {
		if err == nil {
			err = ch.in.WriteMessage(m)
		}
	}
	r.held = nil
	r.ready = true
	if err != nil {
		r.log.Debug("write to server failed", "server", r.name, "err", err)
	}
}

// isReplayAnswer reports whether line answers the replayed initialize.
func (r *relay) isReplayAnswer(line []byte) bool {
	r.mu.Lock()
	id := r.replayID
	r.mu.Unlock()
	if id == nil || !bytes.Contains(line, id) {
		return false
	}
	m, err := Parse(line)
	return err == nil && m.Kind == KindResponse && bytes.Equal(m.ID, id)
}

// readChild relays the child's stdout to the agent.
func (r *relay) readChild(ch *child) {
	defer close(ch.outDone)
	lr := NewLineReader(ch.stdout, r.s.MaxLineBytes)
	var now time.Time
	var done []*Exchange // completed, to be emitted once relayed
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
				if ex := r.fromChild(ch, line, now); ex != nil {
					done = append(done, ex)
				}
			}
		case errors.As(err, &tooLong):
			r.log.Error("server message too long; skipped", "server", r.name, "err", err)
			// An answer the agent awaits (an id, no method) is replaced
			// by an error for the same id, so the request ends.
			if id := tooLong.ID(); id != nil && !gjson.GetBytes(tooLong.Head, "method").Exists() {
				resp := ErrorResponse(id, CodeInternalError, "the server's answer was dropped: "+err.Error())
				if ex := r.fromChild(ch, resp, now); ex != nil {
					done = append(done, ex)
				}
			}
		default:
			r.flushAgent(done) // nothing is left: a burst ends before a wait
			return
		}
		// A burst of messages goes to the agent in one write; flush
		// before waiting for more. The Exchange hook sees the exchanges
		// the burst completed after that: the agent does not wait for it.
		if waited = !lr.Pending() || len(done) >= maxUnflushed; waited {
			done = r.flushAgent(done)
		}
	}
}

// flushAgent writes out what was buffered for the agent, then emits the
// exchanges in done; it returns done emptied.
func (r *relay) flushAgent(done []*Exchange) []*Exchange {
	r.agentFailed(r.agent.Flush())
	for i, ex := range done {
		r.conn.emit(ex)
		done[i] = nil
	}
	return done[:0]
}

// maxUnflushed bounds the exchanges a burst of the child's messages
// completes before readChild flushes them to the agent and emits them.
const maxUnflushed = 256

// fromChild relays one message from the child to the agent's buffer and
// returns the exchange it completed, for the caller to emit, if any.
func (r *relay) fromChild(ch *child, line []byte, now time.Time) *Exchange {
	if r.replay.Load() && r.isReplayAnswer(line) {
		if bytes.Contains(line, []byte(`"error"`)) {
			r.log.Warn("restarted server rejected the replayed initialize", "server", r.name, "response", truncate(string(line), 300))
		}
		_, initialized := r.conn.Handshake()
		go r.becomeReady(ch, initialized)
		return nil
	}
	out, ex := r.conn.fromServerAt(line, now)
	if out != nil {
		r.agentFailed(r.agent.Buffer(out))
	}
	return ex
}

// logStderr copies the child's stderr to the log, line by line.
func (r *relay) logStderr(ch *child) {
	defer close(ch.errDone)
	lr := NewLineReader(ch.stderr, 1<<20)
	for {
		line, err := lr.ReadLine()
		if err != nil {
			var tooLong *LineTooLongError
			if errors.As(err, &tooLong) {
				continue
			}
			return
		}
		r.log.Info("server stderr", "server", r.name, "pid", ch.pgid, "line", truncate(string(bytes.TrimRight(line, "\r")), 16<<10))
	}
}

// supervise waits for each child to exit, fails what it left unanswered
// and starts the next one, until the sidecar stops.
func (r *relay) supervise(ch *child) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = orDefault(r.s.MinRestartDelay, DefaultMinRestartDelay)
	bo.MaxInterval = orDefault(r.s.MaxRestartDelay, DefaultMaxRestartDelay)
	bo.MaxElapsedTime = 0
	bo.Reset()
	for {
		if ch != nil {
			stopping := false
			select {
			case <-ch.exited:
			case <-r.stopCh:
				stopping = true
				r.terminate(ch)
			}
			r.reap(ch, stopping)
			if stopping {
				return
			}
			if time.Since(ch.started) > stableRun {
				bo.Reset()
			}
		}
		delay := bo.NextBackOff()
		select {
		case <-time.After(delay):
		case <-r.stopCh:
			r.failHeld("the sidecar is stopping")
			return
		}
		next, err := r.start()
		if err != nil {
			if ok, dropped := r.crashLog.allow(); ok {
				r.log.Error("restart server", "server", r.name, "err", err, "suppressed", dropped)
			}
			ch = nil
			continue
		}
		r.install(next)
		ch = next
	}
}

// terminate stops ch: close its stdin, then terminate its process group
// gracefully (SIGTERM; CTRL_BREAK_EVENT on Windows), then kill it (SIGKILL;
// TerminateJobObject on Windows), each after the grace period.
func (r *relay) terminate(ch *child) {
	ch.stdin.Close()
	if waitFor(ch.exited, r.grace) {
		return
	}
	r.log.Warn("server did not exit after stdin closed; sending "+termName, "server", r.name, "pid", ch.pgid)
	ch.grp.terminate()
	if waitFor(ch.exited, r.grace) {
		return
	}
	r.log.Warn("server did not exit after "+termName+"; sending "+killName, "server", r.name, "pid", ch.pgid)
	ch.grp.kill()
	<-ch.exited
}

// reap cleans up after an exited child: kills what is left of its process
// group, relays what it wrote before exiting, and answers the agent's
// requests it left unanswered.
func (r *relay) reap(ch *child, stopping bool) {
	ch.grp.kill() // orphaned grandchildren
	ch.grp.release()
	for _, c := range []struct {
		done chan struct{}
		f    *os.File
	}{{ch.outDone, ch.stdout}, {ch.errDone, ch.stderr}} {
		if !waitFor(c.done, time.Second) {
			c.f.Close() // someone outside the group holds the pipe open
			if !waitFor(c.done, r.grace) {
				// Stuck writing to an agent that does not read.
				r.log.Warn("the agent is not reading; not waiting for the server's last output", "server", r.name)
			}
		}
	}
	ch.stdin.Close()
	ch.stdout.Close()
	ch.stderr.Close()
	if !stopping {
		r.settle(ch, false)
		return
	}
	// A stopping sidecar answers what it can, but does not hang on an
	// agent that stopped reading.
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.settle(ch, true)
	}()
	if !waitFor(done, r.grace) {
		r.log.Warn("the agent is not reading; stopping without answering its pending requests", "server", r.name)
	}
}

// settle forgets ch and answers the agent's requests it left unanswered.
func (r *relay) settle(ch *child, stopping bool) {
	// Every agent request not answered yet, sent or held, is failed now;
	// held messages are dropped with them, and the agent's next messages
	// wait for the next child.
	r.inMu.Lock()
	defer r.inMu.Unlock()
	r.mu.Lock()
	if r.cur == ch {
		r.cur, r.ready = nil, false
		r.replay.Store(false)
		r.replayID = nil
	}
	r.held = nil
	r.mu.Unlock()

	status := exitStatus(ch)
	if stopping {
		r.log.Info("server stopped", "server", r.name, "pid", ch.pgid, "status", status)
		r.failPending(fmt.Sprintf("MCP server %q stopped (%s): the sidecar is shutting down", r.name, status))
		return
	}
	r.s.nCrashes.Add(1)
	r.s.lastCrash.Store(time.Now().UnixNano())
	if ok, dropped := r.crashLog.allow(); ok {
		r.log.Error("server exited unexpectedly; restarting", "server", r.name, "pid", ch.pgid,
			"status", status, "ran", time.Since(ch.started).Round(time.Millisecond).String(), "pending", r.conn.Pending(), "suppressed", dropped)
	}
	r.failPending(fmt.Sprintf("MCP server %q exited unexpectedly (%s) before answering; it is being restarted", r.name, status))
}

func (r *relay) failPending(reason string) {
	for _, resp := range r.conn.FailPending(reason) {
		r.toAgent(resp)
	}
}

// failHeld answers the held requests of a stopping sidecar.
func (r *relay) failHeld(reason string) {
	r.inMu.Lock()
	defer r.inMu.Unlock()
	r.mu.Lock()
	r.held = nil
	r.mu.Unlock()
	r.failPending(fmt.Sprintf("MCP server %q is not running: %s", r.name, reason))
}

func exitStatus(ch *child) string {
	if ch.state != nil {
		return ch.state.String() // "exit status 1", "signal: killed"
	}
	if ch.waitErr != nil {
		return ch.waitErr.Error()
	}
	return "exited"
}

func waitFor(c <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
		return true
	case <-t.C:
		return false
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func blank(line []byte) bool {
	if len(line) > 0 && line[0] > ' ' {
		return false // every message but a whitespace-led one
	}
	return len(bytes.TrimSpace(line)) == 0
}

// rateLimit lets burst events through, then one per every. Events it
// drops are not forgotten: the next one it lets through reports how many,
// and when none comes, flush (when set) reports them once the next token is
// there, so a crash loop keeps showing at one line per every.
type rateLimit struct {
	mu      sync.Mutex
	burst   int
	every   time.Duration
	tokens  float64
	last    time.Time
	dropped int
	flush   func(dropped int)
	timer   *time.Timer
	stopped bool
}

// refill adds the tokens earned since the last event. l.mu is held.
func (l *rateLimit) refill(now time.Time) {
	if l.last.IsZero() {
		l.tokens = float64(l.burst)
	} else {
		l.tokens += float64(now.Sub(l.last)) / float64(l.every)
		if l.tokens > float64(l.burst) {
			l.tokens = float64(l.burst)
		}
	}
	l.last = now
}

// allow reports whether an event may be logged, and how many were dropped
// since the last one that was.
func (l *rateLimit) allow() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(time.Now())
	if l.tokens < 1 {
		l.dropped++
		if l.flush != nil && l.timer == nil && !l.stopped {
			l.timer = time.AfterFunc(time.Duration((1-l.tokens)*float64(l.every)), l.fire)
		}
		return false, 0
	}
	l.tokens--
	d := l.dropped
	l.dropped = 0
	return true, d
}

// fire reports the dropped events no later event reported.
func (l *rateLimit) fire() {
	l.mu.Lock()
	l.timer = nil
	if l.dropped == 0 || l.stopped {
		l.mu.Unlock()
		return
	}
	l.refill(time.Now())
	if l.tokens < 1 { // taken meanwhile: wait for the next
		l.timer = time.AfterFunc(time.Duration((1-l.tokens)*float64(l.every)), l.fire)
		l.mu.Unlock()
		return
	}
	l.tokens--
	d := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	l.flush(d)
}

// stop cancels a pending flush.
func (l *rateLimit) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}
