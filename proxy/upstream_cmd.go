package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// CommandUpstream runs an MCP server as a stdio child, one child per
// session. Each child is run by a Stdio, so it gets the stdio transport's
// lifecycle: its own process group, stderr to Logger, and a crashed
// child's pending requests answered with an error naming it. A child that
// exits is not started again: its session ends (the HTTP sidecar frees its
// slot, and the agent, answered 404 on that session, initializes again).
type CommandUpstream struct {
	Path        string
	Args        []string
	Env         []string // nil: the sidecar's environment
	Dir         string
	Server      string       // the server's name, for logs and errors
	Logger      *slog.Logger // receives the child's stderr
	GracePeriod time.Duration
	MaxBytes    int // bounds one message; 0: MaxLineBytes
}

// Dial starts a child. The headers are not used. The session's messages
// reach the child's relay and leave it as they are, with no stdio framing
// in between, and are parsed once, by the session's Conn: the relay
// neither checks nor tracks them again (a child that exits ends the
// session, whose Conn fails the requests it left unanswered).
func (u *CommandUpstream) Dial(ctx context.Context, _ http.Header, sink UpstreamSink) (UpstreamSession, error) {
	st := &Stdio{
		Command: u.Path, Args: u.Args, Env: u.Env, Dir: u.Dir, Server: u.Server,
		Logger: u.Logger, GracePeriod: u.GracePeriod, MaxLineBytes: u.MaxBytes, NoRestart: true,
		childBuf: sessionChildBuf,
	}
	s := &cmdSession{stop: make(chan struct{}), done: make(chan struct{})}
	s.relay = st.newRelay(&sinkWriter{sink: sink.Message})
	s.relay.bare = true
	go func() {
		defer close(s.done)
		err := s.relay.run(context.Background(), func(context.Context) error {
			select {
			case <-s.stop:
			case <-s.relay.stopCh:
			}
			return nil
		})
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		if !closing && sink.Closed != nil {
			if err == nil {
				err = errors.New("server stopped")
			}
			sink.Closed(err)
		}
	}()
	return s, nil
}

// sessionChildBuf is the buffer of a session's child's stdin and stdout:
// one agent's messages, a few at a time.
const sessionChildBuf = 16 << 10

// cmdSession is one child run by a Stdio's relay.
type cmdSession struct {
	relay *relay
	stop  chan struct{} // closed by Close: the agent left
	done  chan struct{} // closed when the relay stopped and its messages were delivered

	mu      sync.Mutex
	closing bool
}

// Send passes msg to the relay, which writes it to the child.
func (s *cmdSession) Send(ctx context.Context, msg []byte, _ http.Header) (*Reply, error) {
	if bytes.ContainsAny(msg, "\r\n") {
		// An HTTP body may be pretty-printed; a stdio line may not.
		var b bytes.Buffer
		if err := json.Compact(&b, msg); err != nil {
			return nil, fmt.Errorf("compact message: %w", err)
		}
		msg = b.Bytes()
	}
	select {
	case <-s.stop:
		return nil, fmt.Errorf("write to server: %w", io.ErrClosedPipe)
	case <-s.done:
		return nil, fmt.Errorf("write to server: %w", io.ErrClosedPipe)
	default:
	}
	if limit := s.relay.maxLine(); len(msg) > limit {
		s.relay.tooLong(&LineTooLongError{Limit: limit, Size: int64(len(msg)), Head: bytes.Clone(msg[:tooLongHead])})
		return nil, nil
	}
	s.relay.fromAgent(ctx, msg, time.Now())
	s.relay.flushChild()
	return nil, nil
}

// Close ends the child as the stdio transport does when its agent leaves
// (stdin closed, then SIGTERM, then SIGKILL to its process group) and waits
// for it.
func (s *cmdSession) Close() error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.done
	return nil
}

// sinkWriter hands the relay's messages for the agent to an HTTP session,
// in order: Buffer holds them until Flush.
type sinkWriter struct {
	sink func(msg []byte)
	mu   sync.Mutex
	held [][]byte
}

func (w *sinkWriter) WriteMessage(msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deliver()
	w.sink(msg)
	return nil
}

func (w *sinkWriter) Buffer(msg []byte) error {
	w.mu.Lock()
	w.held = append(w.held, msg)
	w.mu.Unlock()
	return nil
}

func (w *sinkWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deliver()
	return nil
}

// deliver hands the held messages on. w.mu is held.
func (w *sinkWriter) deliver() {
	for i, m := range w.held {
		w.sink(m)
		w.held[i] = nil
	}
	w.held = w.held[:0]
}
