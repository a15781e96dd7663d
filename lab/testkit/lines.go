package testkit

import (
	"bufio"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// LineClient plays the agent on the other end of a stdio MCP stream: it
// writes lines to the peer's input and reads the peer's output lines in
// the background, each whole but for its newline.
type LineClient struct {
	t     testing.TB
	peer  string // names the other end in failures
	in    io.WriteCloser
	out   io.ReadCloser
	lines chan string
}

// recvWithin is how long Recv waits for a line: a deadline, not a
// measured time.
const recvWithin = 60 * time.Second

// NewLineClient returns a LineClient writing to in and reading out until
// it ends; peer names the other end in failures.
func NewLineClient(t testing.TB, peer string, in io.WriteCloser, out io.ReadCloser) *LineClient {
	c := &LineClient{t: t, peer: peer, in: in, out: out, lines: make(chan string, 1024)}
	go c.read()
	return c
}

// read sends each line of the peer's output to c.lines, a last line
// without a newline included, and closes it when the output ends.
func (c *LineClient) read() {
	defer close(c.lines)
	r := bufio.NewReaderSize(c.out, 64<<10)
	for {
		l, err := r.ReadString('\n')
		if err == nil || (err == io.EOF && l != "") {
			c.lines <- strings.TrimSuffix(l, "\n")
		}
		if err != nil {
			return
		}
	}
}

// StartLineClient starts cmd with pipes on its stdin and stdout and
// returns a LineClient on them, peer naming cmd in failures. When the test
// ends it closes cmd's stdin and waits up to 30 s for it to exit, killing
// it and failing the test when it does not.
func StartLineClient(t testing.TB, cmd *exec.Cmd, peer string) *LineClient {
	t.Helper()
	in, out := StartPiped(t, cmd)
	c := NewLineClient(t, peer, in, out)
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("%s did not exit after stdin closed", peer)
		}
	})
	return c
}

// StartPiped starts cmd with pipes on its stdin and stdout and returns
// them, failing the test when it cannot.
func StartPiped(t testing.TB, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser) {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("pipe stdin: %v", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("pipe stdout: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", filepath.Base(cmd.Path), err)
	}
	return in, out
}

// Send writes each line, with its newline, failing the test when a write
// fails.
func (c *LineClient) Send(lines ...string) {
	c.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(c.in, l+"\n"); err != nil {
			c.t.Fatalf("write to %s: %v", c.peer, err)
		}
	}
}

// Recv returns the peer's next line, failing the test when the output
// ends or no line comes within 60 s.
func (c *LineClient) Recv() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("%s closed its output", c.peer)
		}
		return l
	case <-time.After(recvWithin):
		c.t.Fatalf("no line from %s in %v", c.peer, recvWithin)
	}
	return ""
}

// Lines returns the peer's lines not read yet; it is closed when the
// output ends.
func (c *LineClient) Lines() <-chan string { return c.lines }

// CloseInput closes the peer's input: the agent has left.
func (c *LineClient) CloseInput() error { return c.in.Close() }

// CloseOutput closes the agent's end of the peer's output: the peer's
// next write fails.
func (c *LineClient) CloseOutput() error { return c.out.Close() }
