package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
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
	Session     *Session      // nil: a new stdio session (see NewStdioSession) with TaskID
	TaskID      string        // the explicit task of a new session; the command line reads HINDSIGHT_TASK_ID
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
	// NoRestart makes a child that exits on its own end Run instead of
	// being started again (its pending requests are still answered with
	// an error naming it): for a sidecar whose agent can open a new
	// session, as `hindsight serve` in front of a command does.
	NoRestart bool

	// childBuf is the buffer of the child's stdin and stdout (0:
	// defaultBufSize): smaller for the children of HTTP sessions, one
	// agent each, which number in the hundreds.
	childBuf int

	nStarts, nCrashes atomic.Int64 // see Starts
	lastCrash         atomic.Int64 // unix nanoseconds
}

func (s *Stdio) bufSize() int {
	if s.childBuf > 0 {
		return s.childBuf
	}
	return defaultBufSize
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
// id and the agent host's pid (the sidecar's parent), with no explicit
// task (Stdio sets its TaskID).
func NewStdioSession(server string) *Session {
	var b [12]byte
	rand.Read(b[:])
	return &Session{
		ID:        hex.EncodeToString(b[:]),
		Server:    server,
		Transport: "stdio",
		HostPID:   os.Getppid(),
	}
}

// Run starts the child and relays until the agent closes agentIn or ctx is
// done; then it closes the child's stdin, waits GracePeriod, sends SIGTERM
// to the child's process group, waits GracePeriod again and sends SIGKILL.
// It returns an error when the child cannot be started at all, or when
// reading from or writing to the agent fails.
func (s *Stdio) Run(ctx context.Context, agentIn io.Reader, agentOut io.Writer) error {
	r := s.newRelay(NewLineWriter(agentOut))
	return r.run(ctx, func(ctx context.Context) error { return r.readAgent(ctx, agentIn) })
}

// run starts the child and relays until readAgent returns (nil: the agent
// left) or ctx is done, then stops as Run says. readAgent passes the
// agent's messages to fromAgent; its context ends a grace period after
// the sidecar stopped.
func (r *relay) run(ctx context.Context, readAgent func(context.Context) error) error {
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
	go func() { readDone <- readAgent(localCtx) }()

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
	case <-r.agent.gone:
		runErr = fmt.Errorf("write to agent: %w", r.agent.err)
		r.log.Error("cannot write to the agent; stopping", "server", r.name, "err", r.agent.err)
	case <-superDone: // the child exited, and NoRestart
		runErr = r.exitErr
	}
	close(r.stopCh)
	<-superDone
	r.crashLog.stop()
	r.startLog.stop()
	// Local handlers get a grace period to answer.
	select {
	case <-r.locals.stop():
	case <-time.After(r.grace):
		cancelLocal()
	}
	return runErr
}
