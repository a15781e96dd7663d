package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hindsight-proxy/hindsight/internal/defaults"
)

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
		cmd: cmd, grp: newGroup(cmd), pgid: cmd.Process.Pid, in: newLineWriterSize(inW, r.s.bufSize()), stdin: inW, stdout: outR, stderr: errR,
		started: time.Now(), exited: make(chan struct{}), outDone: make(chan struct{}), errDone: make(chan struct{}),
	}
	r.starts++
	n := r.starts
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

// stderrBufSize is the buffer of a child's stderr reader: log lines are
// short, and a longer one is gathered.
const stderrBufSize = 4 << 10

// logStderr copies the child's stderr to the log, line by line.
func (r *relay) logStderr(ch *child) {
	defer close(ch.errDone)
	lr := newLineReaderSize(ch.stderr, 1<<20, stderrBufSize)
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
	bo.InitialInterval = defaults.Positive(r.s.MinRestartDelay, DefaultMinRestartDelay)
	bo.MaxInterval = defaults.Positive(r.s.MaxRestartDelay, DefaultMaxRestartDelay)
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
			if stopping || r.s.NoRestart {
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
	rt := &r.route
	rt.mu.Lock()
	if rt.cur == ch {
		rt.cur, rt.ready = nil, false
		rt.replay.Store(false)
		rt.replayID = nil
	}
	rt.held = nil
	rt.mu.Unlock()

	status := exitStatus(ch)
	if stopping {
		r.log.Info("server stopped", "server", r.name, "pid", ch.pgid, "status", status)
		r.failPending(fmt.Sprintf("MCP server %q stopped (%s): the sidecar is shutting down", r.name, status))
		return
	}
	r.s.nCrashes.Add(1)
	r.s.lastCrash.Store(time.Now().UnixNano())
	if r.s.NoRestart {
		// A bare relay tracks no requests: the session's end fails
		// them, with this as the reason.
		r.exitErr = fmt.Errorf("MCP server %q exited unexpectedly (%s); its session ends", r.name, status)
		r.log.Warn("server exited; not restarting it", "server", r.name, "pid", ch.pgid, "status", status,
			"ran", time.Since(ch.started).Round(time.Millisecond).String(), "pending", r.conn.Pending())
		r.failPending(fmt.Sprintf("MCP server %q exited unexpectedly (%s) before answering; its session ends", r.name, status))
		return
	}
	if ok, dropped := r.crashLog.allow(); ok {
		r.log.Error("server exited unexpectedly; restarting", "server", r.name, "pid", ch.pgid,
			"status", status, "ran", time.Since(ch.started).Round(time.Millisecond).String(), "pending", r.conn.Pending(), "suppressed", dropped)
	}
	r.failPending(fmt.Sprintf("MCP server %q exited unexpectedly (%s) before answering; it is being restarted", r.name, status))
}

func (r *relay) failPending(reason string) {
	for _, resp := range r.conn.FailPending(reason) {
		r.agent.write(resp)
	}
}

// failHeld answers the held requests of a stopping sidecar.
func (r *relay) failHeld(reason string) {
	r.inMu.Lock()
	defer r.inMu.Unlock()
	r.route.mu.Lock()
	r.route.held = nil
	r.route.mu.Unlock()
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
