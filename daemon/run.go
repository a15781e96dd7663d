package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/filelock"
	"github.com/hindsight-proxy/hindsight/internal/safelog"
)

// ErrAlreadyRunning reports that another daemon holds the lock.
var ErrAlreadyRunning = errors.New("another daemon is running")

// Lock is the daemon's single-instance lock: an flock on
// $HINDSIGHT_HOME/daemon.lock, held for the daemon's life. The kernel
// releases it when the process dies, however it dies.
type Lock struct{ f *os.File }

// LockPath returns the lock file of home.
func LockPath(home hindsight.Home) string { return home.Path("daemon.lock") }

// AcquireLock takes the lock without waiting. It returns an error wrapping
// ErrAlreadyRunning when another process holds it.
func AcquireLock(home hindsight.Home) (*Lock, error) {
	if err := home.Ensure(); err != nil {
		return nil, fmt.Errorf("acquire lock: %w", err)
	}
	f, err := os.OpenFile(LockPath(home), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := filelock.TryLock(f, false); err != nil {
		f.Close()
		if errors.Is(err, filelock.ErrWouldBlock) {
			pid := LockHolder(home)
			return nil, fmt.Errorf("lock %s: %w (pid %d)", LockPath(home), ErrAlreadyRunning, pid)
		}
		return nil, fmt.Errorf("lock %s: %w", LockPath(home), err)
	}
	// The pid is for people and tests; the flock is what counts.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}

// LockHeld reports whether a process holds the daemon's lock now (a pid
// in the lock file may be a dead daemon's).
func LockHeld(home hindsight.Home) bool { return filelock.Held(LockPath(home)) }

// LockHolder returns the pid written in the lock file, or 0.
func LockHolder(home hindsight.Home) int {
	b, err := os.ReadFile(LockPath(home))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Listen creates the daemon's Unix socket, mode 0600 from the start (the
// umask is tightened while it is created, then the mode set again). The
// caller must hold the lock: a socket file left by a dead daemon is
// removed.
func Listen(home hindsight.Home, l *Lock) (net.Listener, error) {
	if l == nil || l.f == nil {
		return nil, errors.New("listen: the daemon lock is not held")
	}
	path := home.Socket()
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("listen: socket path %s is %d bytes, longer than a Unix socket allows (%d); choose a shorter HINDSIGHT_HOME", path, len(path), maxSocketPath)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err := listenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := restrictSocket(path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	id, err := fileID(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("stat socket: %w", err)
	}
	ul := ln.(*net.UnixListener)
	// Close removes the file only while it is still this one: a daemon
	// whose home was recreated must not take the new daemon's socket.
	ul.SetUnlinkOnClose(false)
	return &socketListener{UnixListener: ul, path: path, id: id}, nil
}

// ErrSocketGone reports that a daemon's socket file was removed or replaced:
// its home was deleted (a test's temporary directory, say) or another
// daemon listens there now. The daemon then has nothing left to serve.
var ErrSocketGone = errors.New("the daemon's socket is gone")

// socketListener is the daemon's Unix listener, which knows its socket
// file by device and inode.
type socketListener struct {
	*net.UnixListener
	path string
	id   [2]uint64

	closeOnce sync.Once
	closeErr  error
	mu        sync.Mutex
	closed    bool
	lost      error // what gone said when the listener closed
}

// Close stops listening and removes the socket file if it is still this
// listener's.
func (l *socketListener) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.UnixListener.Close()
		lost := l.gone()
		if lost == nil {
			_ = os.Remove(l.path)
		}
		l.mu.Lock()
		l.closed, l.lost = true, lost
		l.mu.Unlock()
	})
	return l.closeErr
}

// gone returns nil while the listener's socket file is in place, else an
// error wrapping ErrSocketGone that says what happened to it. After Close
// it answers as of the close.
func (l *socketListener) gone() error {
	l.mu.Lock()
	closed, lost := l.closed, l.lost
	l.mu.Unlock()
	if closed {
		return lost
	}
	id, err := fileID(l.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %s was removed", ErrSocketGone, l.path)
	case err != nil:
		return fmt.Errorf("%w: stat %s: %w", ErrSocketGone, l.path, err)
	case id != l.id:
		return fmt.Errorf("%w: %s was replaced", ErrSocketGone, l.path)
	}
	return nil
}

// SocketGone returns nil while ln (from Listen) still owns its socket
// file, else an error wrapping ErrSocketGone; once ln is closed it answers
// as of the close. It returns nil for other listeners.
func SocketGone(ln net.Listener) error {
	if l, ok := ln.(*socketListener); ok {
		return l.gone()
	}
	return nil
}

// SocketCheckInterval is how often WatchSocket looks at the socket file.
const SocketCheckInterval = 2 * time.Second

// WatchSocket waits until ctx is done (it then returns nil) or until ln's
// socket file is removed or replaced (it returns why, wrapping
// ErrSocketGone), looking every interval (0: SocketCheckInterval).
func WatchSocket(ctx context.Context, ln net.Listener, interval time.Duration) error {
	if interval <= 0 {
		interval = SocketCheckInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := SocketGone(ln); err != nil {
			return err
		}
	}
}

// StartTimeout bounds how long EnsureRunning waits for a daemon it started
// when ctx has no deadline.
const StartTimeout = 15 * time.Second

// StopTimeout bounds how long EnsureRunning, when ctx has no deadline,
// waits for a daemon that holds the lock without answering (one stopping:
// its shutdown takes at most 30 s) to let go of it, before it starts one.
const StopTimeout = 40 * time.Second

// EnsureRunning returns a client for the daemon of home, starting one when
// none answers: exe (the hindsight binary) is run as `exe [globalArgs…]
// daemon`, detached in a session of its own with stdin, stdout and stderr
// on /dev/null (it logs to its own file), inheriting the environment with
// HINDSIGHT_HOME set to home and, unless it sets GOMAXPROCS, GOMAXPROCS=1
// (see daemonEnv). Concurrent callers may each start one; the
// lock lets one survive, and every caller waits until it answers.
//
// A daemon that is stopping holds the lock after it stopped answering:
// the one started then loses the lock, so EnsureRunning waits for the
// lock to be let go (up to StopTimeout) and starts another.
func EnsureRunning(ctx context.Context, home hindsight.Home, exe string, globalArgs ...string) (*Client, error) {
	// The daemon runs in /: a relative home would name another directory.
	if abs, err := filepath.Abs(string(home)); err == nil {
		home = hindsight.Home(abs)
	}
	c := NewClient(home.Socket())
	if ping(ctx, c) == nil {
		return c, nil
	}
	// Without the caller's deadline, the wait is bounded by ours, which
	// a stopping daemon extends (once per start).
	var deadline time.Time
	if _, ok := ctx.Deadline(); !ok {
		deadline = time.Now().Add(StartTimeout)
	}
	if err := home.Ensure(); err != nil {
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	// What the daemon says before its log is open (a missing hindsightd,
	// a bad configuration) goes to a file of its own, so a failed start
	// can say why.
	errPath := home.Path("logs", "daemon-start.err")
	for starts := 1; ; starts++ {
		exited, err := spawn(home, exe, errPath, globalArgs)
		if err != nil {
			return nil, fmt.Errorf("start daemon: %w", err)
		}
		lost, err := await(ctx, c, home, exited, errPath, &deadline)
		switch {
		case err != nil:
			return nil, err
		case !lost:
			return c, nil
		case starts == maxStarts:
			return nil, fmt.Errorf("start daemon: %d daemons started one after the other lost the lock on %s", starts, LockPath(home))
		}
	}
}

// maxStarts bounds the daemons EnsureRunning starts one after the other,
// each after the one that held the lock let go.
const maxStarts = 4

// spawn starts `exe [globalArgs…] daemon` detached, its early errors to
// errPath; the channel says when it exits.
func spawn(home hindsight.Home, exe, errPath string, globalArgs []string) (<-chan error, error) {
	cmd := exec.Command(exe, append(append([]string{}, globalArgs...), "daemon")...)
	cmd.Env = daemonEnv(os.Environ(), home)
	cmd.Dir = "/"
	if f, _, err := safelog.OpenFile(errPath, os.O_TRUNC); err == nil {
		cmd.Stderr = f
		defer f.Close()
	}
	cmd, err := startDetached(cmd)
	if err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reap it if it loses the lock
	return exited, nil
}

// await waits until a daemon answers at c (nil error), ctx is done or
// *deadline (when set) passes. When the daemon it started lost the lock
// and the holder let go of it without answering (a daemon that stopped),
// it returns lost, for the caller to start another.
func await(ctx context.Context, c *Client, home hindsight.Home, exited <-chan error, errPath string, deadline *time.Time) (lost bool, err error) {
	delay := 20 * time.Millisecond
	var exitErr error
	extended := false
	for {
		if ping(ctx, c) == nil {
			return false, nil
		}
		if exited == nil && !lockHeld(home) && ping(ctx, c) != nil {
			// The holder let go: start another.
			if !deadline.IsZero() {
				*deadline = later(*deadline, time.Now().Add(StartTimeout))
			}
			return true, nil
		}
		if !deadline.IsZero() && time.Now().After(*deadline) {
			return false, notAnswering(home, exitErr, context.DeadlineExceeded)
		}
		select {
		case <-ctx.Done():
			return false, notAnswering(home, exitErr, ctx.Err())
		case exitErr = <-exited:
			if exitErr == nil {
				exitErr = errors.New("exit status 0")
			}
			exited = nil
			// It lost the lock to another daemon: wait for that one, or
			// for it to let go if it is stopping. Else it failed on its
			// own: say why now, not at the deadline.
			if !lockHeld(home) && ping(ctx, c) != nil {
				why := startError(errPath, home)
				if strings.Contains(why, ErrAlreadyRunning.Error()) {
					continue // the holder let go since: the loop starts another
				}
				return false, fmt.Errorf("start daemon: it exited (%v)%s", exitErr, why)
			}
			if !deadline.IsZero() && !extended {
				*deadline, extended = later(*deadline, time.Now().Add(StopTimeout)), true
			}
		case <-time.After(delay):
			delay = min(delay*2, 250*time.Millisecond)
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// notAnswering is EnsureRunning's error when no daemon answered in time.
func notAnswering(home hindsight.Home, exitErr, cause error) error {
	msg := "no daemon answers"
	if exitErr != nil {
		msg = fmt.Sprintf("the daemon it started exited (%v)", exitErr)
		if lockHeld(home) {
			msg += fmt.Sprintf(" and the lock's holder (pid %d) does not answer", LockHolder(home))
		}
	}
	return fmt.Errorf("start daemon: %s on %s; see %s: %w", msg, home.Socket(), home.Path("logs", "daemon.log"), cause)
}

// lockHeld reports whether a process holds home's daemon lock.
func lockHeld(home hindsight.Home) bool {
	f, err := os.Open(LockPath(home))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := filelock.TryLock(f, true); err != nil {
		return errors.Is(err, filelock.ErrWouldBlock)
	}
	filelock.Unlock(f)
	return false
}

// startError is what a daemon that failed to start wrote before its log
// was open (the last 2 KiB of errPath), else where its log is.
func startError(errPath string, home hindsight.Home) string {
	b, _ := os.ReadFile(errPath)
	if msg := strings.TrimSpace(string(b)); msg != "" {
		if len(msg) > 2048 {
			msg = "…" + msg[len(msg)-2048:]
		}
		return ": " + msg
	}
	return "; see " + home.Path("logs", "daemon.log")
}

// daemonEnv is the environment EnsureRunning starts a daemon with: env,
// with HINDSIGHT_HOME set to home, and GOMAXPROCS=1 unless env sets it.
//
// One processor suits the daemon: its work is bursts of ingest (a batch of
// steps every few milliseconds while an agent calls tools) and waiting.
// With more, each batch hands goroutines (the connection's, Badger's
// writer's) from thread to thread, and the runtime wakes idle threads to
// look for work: on a small machine that costs the daemon more CPU than
// ingest itself, taken from the relay beside it (lab/bench/README.md).
func daemonEnv(env []string, home hindsight.Home) []string {
	env = append(env[:len(env):len(env)], "HINDSIGHT_HOME="+string(home))
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") }) {
		env = append(env, "GOMAXPROCS=1")
	}
	return env
}

func ping(ctx context.Context, c *Client) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Health(ctx)
	return err
}

// MemoryBudget is the daemon's soft memory limit (debug.SetMemoryLimit),
// for a resident size of about 100 MB whatever it stored. The Go heap
// holds Badger's memtables (two databases, up to two arenas of about
// 10 MB each), its block caches (8 MB each), a request's working set (a
// batch, a streamed chunk of steps, reflection's window of a long task:
// a few MB) and the caches of the experience store; the rest of the
// resident size is the program's text, stacks and the pages of Badger's
// mapped files. Under the limit the runtime collects sooner and returns
// freed memory to the system instead of letting the heap double. When
// the live heap outgrows it (a large experience store, an import), the
// limit follows it: see FollowLiveHeap.
const MemoryBudget = 64 << 20

// SetMemoryLimit gives the runtime the daemon's soft memory limit,
// MemoryBudget, unless envSet (the environment sets GOMEMLIMIT, which the
// runtime already applied). It returns the limit in force.
func SetMemoryLimit(envSet bool) int64 {
	if !envSet {
		debug.SetMemoryLimit(MemoryBudget)
	}
	return debug.SetMemoryLimit(-1)
}
