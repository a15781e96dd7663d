//go:build linux

package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tidwall/gjson"
)

// Bridge is the floor `hindsight serve -- CMD` is measured against: a
// Streamable HTTP front door that records nothing. A POST without
// Mcp-Session-Id starts Argv as the child of a new session and names the
// session in its answer's Mcp-Session-Id; every POST writes its body to
// its session's child as one line and, for a request, answers with the
// child's line that has the same id, as application/json (other lines are
// dropped). A session's POSTs are relayed one at a time. DELETE ends a
// session. It checks nothing else: it is the least any stdio bridge does.
type Bridge struct {
	Argv []string

	mu       sync.Mutex
	sessions map[string]*bridgeSession
	next     atomic.Uint64
}

type bridgeSession struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get("Mcp-Session-Id")
	switch {
	case r.Method == http.MethodDelete:
		if s := b.take(sid); s != nil {
			s.close()
		}
		return
	case r.Method != http.MethodPost:
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var s *bridgeSession
	if sid == "" {
		if s, sid, err = b.start(); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Mcp-Session-Id", sid)
	} else if s = b.session(sid); s == nil {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	id := gjson.GetBytes(body, "id")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.in.Write(append(body, '\n')); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if !id.Exists() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	for {
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if gjson.GetBytes(line, "id").Raw == id.Raw {
			w.Header().Set("Content-Type", "application/json")
			w.Write(line)
			return
		}
	}
}

// start starts a session's child.
func (b *Bridge) start() (*bridgeSession, string, error) {
	cmd := exec.Command(b.Argv[0], b.Argv[1:]...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", fmt.Errorf("bridge: stdin pipe: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", fmt.Errorf("bridge: stdout pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("bridge: start %s: %w", b.Argv[0], err)
	}
	s := &bridgeSession{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}
	sid := strconv.FormatUint(b.next.Add(1), 10)
	b.mu.Lock()
	if b.sessions == nil {
		b.sessions = make(map[string]*bridgeSession)
	}
	b.sessions[sid] = s
	b.mu.Unlock()
	return s, sid, nil
}

func (b *Bridge) session(sid string) *bridgeSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[sid]
}

// take removes a session and returns it (nil when there is none).
func (b *Bridge) take(sid string) *bridgeSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[sid]
	delete(b.sessions, sid)
	return s
}

// Close ends every session: each child gets EOF and is waited for.
func (b *Bridge) Close() {
	b.mu.Lock()
	all := b.sessions
	b.sessions = nil
	b.mu.Unlock()
	for _, s := range all {
		s.close()
	}
}

func (s *bridgeSession) close() {
	s.in.Close()
	s.cmd.Wait()
}
