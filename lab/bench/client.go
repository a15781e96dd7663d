//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tidwall/gjson"
)

// ErrClosed is returned by calls on a client whose server went away.
var ErrClosed = errors.New("server closed the connection")

// Client speaks newline-delimited JSON-RPC to an MCP server over a pair of
// streams and lets any number of goroutines have calls in flight at once.
//
// Writes are combined: a caller that finds another caller writing leaves
// its request in a shared buffer for that writer to send, so a burst of
// concurrent calls costs few write calls and an idle client costs no extra
// goroutine hop.
type Client struct {
	w io.Writer

	wmu      sync.Mutex
	wbuf     []byte
	spare    []byte
	flushing bool
	werr     error

	next    atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan reply

	done    chan struct{} // closed when the reader stops
	readErr error         // why it stopped; read after done
}

// NewClient returns a client writing requests to w and reading responses
// from r until r fails or reaches EOF.
func NewClient(r io.Reader, w io.Writer) *Client {
	c := &Client{w: w, pending: make(map[uint64]chan reply), done: make(chan struct{})}
	go c.readLoop(r)
	return c
}

// Call sends a request and waits for its response. params is JSON (nil for
// none). It returns the "result" member, or an error for a JSON-RPC error
// response, a closed connection or a done ctx.
func (c *Client) Call(ctx context.Context, method string, params []byte) ([]byte, error) {
	id := c.next.Add(1)
	ch := make(chan reply, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()

	msg := make([]byte, 0, 64+len(method)+len(params))
	msg = append(msg, `{"jsonrpc":"2.0","id":`...)
	msg = strconv.AppendUint(msg, id, 10)
	msg = append(msg, `,"method":"`...)
	msg = append(msg, method...)
	msg = append(msg, '"')
	if params != nil {
		msg = append(msg, `,"params":`...)
		msg = append(msg, params...)
	}
	msg = append(msg, "}\n"...)
	if err := c.send(msg); err != nil {
		c.forget(id)
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%s: server answered with an error: %s", method, r.err)
		}
		return r.result, nil
	case <-c.done:
		c.forget(id)
		return nil, fmt.Errorf("%s: %w", method, c.readErr)
	case <-ctx.Done():
		c.forget(id)
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Notify sends a notification.
func (c *Client) Notify(method string, params []byte) error {
	msg := append([]byte(`{"jsonrpc":"2.0","method":"`), method...)
	msg = append(msg, '"')
	if params != nil {
		msg = append(msg, `,"params":`...)
		msg = append(msg, params...)
	}
	return c.send(append(msg, "}\n"...))
}

// Initialize performs the MCP handshake: initialize, then
// notifications/initialized.
func (c *Client) Initialize(ctx context.Context) error {
	_, err := c.Call(ctx, "initialize", []byte(`{"protocolVersion":"2025-11-25","capabilities":{},`+
		`"clientInfo":{"name":"relaybench","version":"1.0.0"}}`))
	if err != nil {
		return err
	}
	return c.Notify("notifications/initialized", nil)
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// send appends msg to the write buffer and, unless another caller is
// already writing, writes the buffer out until it is empty.
func (c *Client) send(msg []byte) error {
	c.wmu.Lock()
	if c.werr != nil {
		err := c.werr
		c.wmu.Unlock()
		return err
	}
	c.wbuf = append(c.wbuf, msg...)
	if c.flushing {
		c.wmu.Unlock()
		return nil
	}
	c.flushing = true
	for len(c.wbuf) > 0 {
		buf := c.wbuf
		c.wbuf = c.spare[:0]
		c.wmu.Unlock()
		_, err := c.w.Write(buf)
		c.wmu.Lock()
		c.spare = buf
		if err != nil {
			c.werr = fmt.Errorf("write request: %w", err)
			c.wbuf = c.wbuf[:0]
			break
		}
	}
	c.flushing = false
	err := c.werr
	c.wmu.Unlock()
	return err
}

func (c *Client) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	var err error
	for {
		var chunk []byte
		chunk, err = br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line = append(line, chunk...)
			continue
		}
		if err != nil {
			break
		}
		if line != nil {
			chunk = append(line, chunk...)
			line = nil
		}
		c.dispatch(chunk)
	}
	if err == io.EOF {
		err = ErrClosed
	}
	c.readErr = err
	close(c.done)
}

// reply is a response as its caller receives it.
type reply struct {
	result []byte // the "result" member
	err    []byte // the "error" member; nil for a success
}

// dispatch hands a response to its caller, decoding its top-level members
// in one pass. Requests and notifications from the server are ignored: the
// echo server sends none.
func (c *Client) dispatch(msg []byte) {
	var id, method, result, rpcErr gjson.Result
	gjson.ParseBytes(msg).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			id = v
		case "method":
			method = v
		case "result":
			result = v
		case "error":
			rpcErr = v
		}
		return true
	})
	if method.Exists() || id.Type != gjson.Number {
		return
	}
	c.mu.Lock()
	ch := c.pending[id.Uint()]
	delete(c.pending, id.Uint())
	c.mu.Unlock()
	if ch == nil {
		return
	}
	r := reply{result: []byte(result.Raw)} // converting copies: msg is reused
	if rpcErr.Exists() {
		r.err = []byte(rpcErr.Raw)
	}
	ch <- r
}

// Process is an MCP server running as a child process, reached over its
// stdin and stdout.
type Process struct {
	*Client
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	waited chan struct{}
	err    error // from Wait; read after waited
}

// Start runs argv with env added to this process's environment, in a
// process group of its own, and returns a client on its stdio. The child's
// stderr is kept (its last 64 KiB) for error messages.
func Start(argv []string, env []string) (*Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("start: no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Process{cmd: cmd, stderr: &tailBuffer{max: 64 << 10}, waited: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start: stdin pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start: stdout pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	p.Client = NewClient(stdout, p.stdin)
	go func() {
		<-p.Client.done // Wait closes stdout: let the reader finish first
		p.err = cmd.Wait()
		close(p.waited)
	}()
	return p, nil
}

// PID returns the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Stderr returns the last bytes the child wrote to stderr.
func (p *Process) Stderr() string { return p.stderr.String() }

// PeakRSS returns the child's peak resident set size in bytes (VmHWM from
// /proc/PID/status). It works on Linux only.
func (p *Process) PeakRSS() (int64, error) { return peakRSS(p.PID()) }

// Close closes the child's stdin, which tells an MCP server to exit, and
// waits up to grace for it to do so before killing its process group.
func (p *Process) Close(grace time.Duration) error {
	p.stdin.Close()
	select {
	case <-p.waited:
	case <-time.After(grace):
		syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.waited
		return fmt.Errorf("close %s: did not exit within %v of stdin EOF; killed", p.cmd.Path, grace)
	}
	if p.err != nil {
		return fmt.Errorf("close %s: %w (stderr: %s)", p.cmd.Path, p.err, strings.TrimSpace(p.Stderr()))
	}
	return nil
}

// Usage is what a process has consumed so far.
type Usage struct {
	Syscalls int64         // read and write system calls (syscr + syscw)
	CPU      time.Duration // user and system time, at clock-tick resolution
}

// Usage returns the child's system calls and CPU time so far, over all its
// threads, from /proc/PID/io and /proc/PID/stat. It works on Linux only.
func (p *Process) Usage() (Usage, error) {
	var u Usage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.PID()))
	if err != nil {
		return u, fmt.Errorf("read usage: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "syscr" && k != "syscw") {
			continue
		}
		c, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return u, fmt.Errorf("read usage: %q: %w", line, err)
		}
		u.Syscalls += c
	}
	if u.CPU, err = cpuTime(p.PID()); err != nil {
		return u, err
	}
	return u, nil
}

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on every Linux this runs on).
const clockTick = 10 * time.Millisecond

func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis, where field 3 (state) starts.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("read CPU time: unexpected %q", b)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read CPU time: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

func peakRSS(pid int) (int64, error) { return ProcStatus(pid, "VmHWM") }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
