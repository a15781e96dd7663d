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

// Dial starts a child. The headers are not used.
func (u *CommandUpstream) Dial(ctx context.Context, _ http.Header, sink UpstreamSink) (UpstreamSession, error) {
	st := &Stdio{
		Command: u.Path, Args: u.Args, Env: u.Env, Dir: u.Dir, Server: u.Server,
		Logger: u.Logger, GracePeriod: u.GracePeriod, MaxLineBytes: u.MaxBytes, NoRestart: true,
	}
	toChildR, toChildW := io.Pipe()
	fromChildR, fromChildW := io.Pipe()
	s := &cmdSession{in: NewLineWriter(toChildW), inClose: toChildW, done: make(chan struct{})}
	go func() {
		err := st.Run(context.Background(), toChildR, fromChildW)
		toChildR.CloseWithError(io.ErrClosedPipe)
		fromChildW.CloseWithError(io.EOF)
		s.mu.Lock()
		s.runErr = err
		s.mu.Unlock()
	}()
	go func() {
		defer close(s.done)
		lr := NewLineReader(fromChildR, u.MaxBytes)
		for {
			line, err := lr.ReadLine()
			var tooLong *LineTooLongError
			if errors.As(err, &tooLong) {
				continue
			}
			if err != nil {
				break
			}
			sink.Message(line)
		}
		fromChildR.Close()
		s.mu.Lock()
		closing, runErr := s.closing, s.runErr
		s.mu.Unlock()
		if !closing && sink.Closed != nil {
			if runErr == nil {
				runErr = errors.New("server stopped")
			}
			sink.Closed(runErr)
		}
	}()
	return s, nil
}

// cmdSession is one child run by a Stdio.
type cmdSession struct {
	in      *LineWriter
	inClose io.Closer
	done    chan struct{} // closed when the Stdio stopped and its output was read

	mu      sync.Mutex
	closing bool
	runErr  error
}

// Send writes msg as one line to the Stdio relay.
func (s *cmdSession) Send(ctx context.Context, msg []byte, _ http.Header) (*Reply, error) {
	if bytes.ContainsAny(msg, "\r\n") {
		// An HTTP body may be pretty-printed; a stdio line may not.
		var b bytes.Buffer
		if err := json.Compact(&b, msg); err != nil {
			return nil, fmt.Errorf("compact message: %w", err)
		}
		msg = b.Bytes()
	}
	if err := s.in.WriteMessage(msg); err != nil {
		return nil, fmt.Errorf("write to server: %w", err)
	}
	return nil, nil
}

// Close ends the child as the stdio transport does when its agent leaves
// (stdin closed, then SIGTERM, then SIGKILL to its process group) and waits
// for it.
func (s *cmdSession) Close() error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.inClose.Close()
	<-s.done
	return nil
}
