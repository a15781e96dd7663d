// Package weaviatetest runs a real Weaviate server for tests: the
// weaviate-server binary (v1.39.3) on free loopback ports with a temporary
// data directory, stopped when the test ends.
//
// The binary is $HINDSIGHT_WEAVIATE_BIN, else
// $HOME/.cache/hindsight/bin/weaviate-server, installed with
//
//	GOBIN=$HOME/.cache/hindsight/bin go install github.com/weaviate/weaviate/cmd/weaviate-server@v1.39.3
//
// (make deps does this). A missing binary fails a Start; StartCluster (a
// multi-node cluster, see cluster.go) skips its test with that command.
package weaviatetest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Version is the Weaviate release the tests are written against.
const Version = "v1.39.3"

// Server is a running Weaviate.
type Server struct {
	// URL is the REST address, e.g. http://127.0.0.1:41234.
	URL string
	// Host is URL's host:port, GRPC the gRPC host:port.
	Host, GRPC string
	// DataDir is the persistence directory.
	DataDir string

	bin   string
	env   []string // added to (and overriding) the defaults
	ports map[string]int
	log   *logBuffer
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan error
}

// Binary returns the path of the weaviate-server binary.
func Binary() string {
	if b := os.Getenv("HINDSIGHT_WEAVIATE_BIN"); b != "" {
		return b
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "hindsight", "bin", "weaviate-server")
}

// Start runs Weaviate with a new data directory and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartDir(t, t.TempDir())
}

// StartWithAPIKey runs Weaviate with API-key authentication on (and
// anonymous access off): requests must carry "Authorization: Bearer key".
func StartWithAPIKey(t testing.TB, key string) *Server {
	t.Helper()
	return startDir(t, t.TempDir(), []string{
		"AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=false",
		"AUTHENTICATION_APIKEY_ENABLED=true",
		"AUTHENTICATION_APIKEY_ALLOWED_KEYS=" + key,
		"AUTHENTICATION_APIKEY_USERS=hindsight",
	})
}

// StartDir runs Weaviate over dir and stops it when t ends.
func StartDir(t testing.TB, dir string) *Server {
	t.Helper()
	return startDir(t, dir, nil)
}

func startDir(t testing.TB, dir string, env []string) *Server {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("weaviate-server not found at %s (%v); install it with:\n"+
			"  GOBIN=$HOME/.cache/hindsight/bin go install github.com/weaviate/weaviate/cmd/weaviate-server@%s\n"+
			"or set HINDSIGHT_WEAVIATE_BIN", bin, err, Version)
	}
	// A port found free can be taken before the server binds it (another
	// test's server, an outgoing connection): a first start on an empty
	// directory is then tried again on other ports, the directory emptied
	// (the failed start may have kept its ports in its Raft state).
	entries, _ := os.ReadDir(dir)
	fresh := len(entries) == 0
	for attempt := 1; ; attempt++ {
		s, err := newServer(bin, dir, env)
		if err != nil {
			t.Fatal(err)
		}
		err = s.start()
		if err != nil && fresh && attempt < 3 && strings.Contains(s.tail(4000), "address already in use") {
			t.Logf("start weaviate: a port was taken meanwhile, trying other ports: %v", err)
			s.Stop()
			if err := emptyDir(dir); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Cleanup(func() {
			if err := s.Stop(); err != nil {
				t.Errorf("stop weaviate: %v", err)
			}
			if t.Failed() {
				t.Logf("weaviate log (tail):\n%s", s.tail(4000))
			}
		})
		if err != nil {
			t.Fatalf("start weaviate: %v\n%s", err, s.tail(4000))
		}
		return s
	}
}

// emptyDir removes what dir holds, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read data dir: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("empty data dir: %w", err)
		}
	}
	return nil
}

// portNames are the ports each server listens on.
var portNames = []string{"http", "grpc", "gossip", "data", "raft", "raft_rpc", "profiling"}

// newServer prepares (without starting) a server over dir on free ports.
func newServer(bin, dir string, env []string) (*Server, error) {
	ports, err := freePorts(len(portNames))
	if err != nil {
		return nil, fmt.Errorf("find free ports: %w", err)
	}
	s := &Server{DataDir: dir, bin: bin, env: env, ports: map[string]int{}, log: new(logBuffer)}
	for i, n := range portNames {
		s.ports[n] = ports[i]
	}
	s.Host = "127.0.0.1:" + strconv.Itoa(s.ports["http"])
	s.URL = "http://" + s.Host
	s.GRPC = "127.0.0.1:" + strconv.Itoa(s.ports["grpc"])
	return s, nil
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, "--host", "127.0.0.1", "--port", strconv.Itoa(s.ports["http"]),
		"--scheme", "http", "--graceful-timeout", "5s")
	cmd.Env = append(os.Environ(),
		"PERSISTENCE_DATA_PATH="+s.DataDir,
		"AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true",
		"DEFAULT_VECTORIZER_MODULE=none",
		"ENABLE_MODULES=",
		"DISABLE_TELEMETRY=true",
		"GO_PROFILING_DISABLE=true",
		"GO_PROFILING_PORT="+strconv.Itoa(s.ports["profiling"]),
		"LOG_LEVEL=warning",
		"QUERY_DEFAULTS_LIMIT=100",
		"CLUSTER_HOSTNAME=node1",
		"CLUSTER_IN_LOCALHOST=true",
		"CLUSTER_BIND_ADDR=127.0.0.1",
		"CLUSTER_ADVERTISE_ADDR=127.0.0.1",
		"CLUSTER_GOSSIP_BIND_PORT="+strconv.Itoa(s.ports["gossip"]),
		"CLUSTER_DATA_BIND_PORT="+strconv.Itoa(s.ports["data"]),
		"RAFT_PORT="+strconv.Itoa(s.ports["raft"]),
		"RAFT_INTERNAL_RPC_PORT="+strconv.Itoa(s.ports["raft_rpc"]),
		"RAFT_BOOTSTRAP_EXPECT=1",
		"GRPC_PORT="+strconv.Itoa(s.ports["grpc"]),
		"GOMEMLIMIT=1GiB",
	)
	cmd.Env = append(cmd.Env, s.env...) // the last value of a key wins
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	newProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	done := make(chan error, 1)
	s.done = done
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/v1/.well-known/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-done:
			s.cmd = nil
			return fmt.Errorf("weaviate exited before it was ready: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("weaviate not ready after 120s")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 30 s). It is safe to
// call more than once.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd := s.cmd
	s.cmd = nil
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		killProcessGroup(cmd)
		<-s.done
		return fmt.Errorf("weaviate did not stop in 30s; killed")
	}
	return nil
}

// Kill ends the server at once with SIGKILL, as a crashed node or a
// pulled plug would; Start brings it back on the same data and ports.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	killProcessGroup(s.cmd)
	<-s.done
	s.cmd = nil
}

// Start starts a stopped or killed server again on the same data directory
// and ports and waits until it is ready.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("start weaviate: %v\n%s", err, s.tail(4000))
	}
}

// Resume starts a stopped or killed server again, as Start does, outside
// a test.
func (s *Server) Resume() error {
	if err := s.start(); err != nil {
		return fmt.Errorf("start weaviate: %w\n%s", err, s.tail(4000))
	}
	return nil
}

// PID returns the server's process id, 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Restart stops the server and starts it again on the same data directory
// and ports.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.start(); err != nil {
		t.Fatalf("restart weaviate: %v\n%s", err, s.tail(4000))
	}
}

func (s *Server) tail(n int) string { return s.log.tail(n) }

// logBuffer collects the server's output; the process writes it while
// tests read it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		l.b.Next(l.b.Len() - 1<<19)
	}
	return l.b.Write(p)
}

func (l *logBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// freePorts returns n consecutive free loopback ports: Weaviate derives
// some peer ports from others (data = gossip+1, raft RPC = raft+1), so
// they must be adjacent.
func freePorts(n int) ([]int, error) {
	for range 100 {
		// Below Linux's ephemeral range (32768 and up by default), where
		// outgoing connections take their ports.
		base := 10000 + rand.IntN(22000)
		var ls []net.Listener
		ok := true
		for i := range n {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			out := make([]int, n)
			for i := range out {
				out[i] = base + i
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("no %d consecutive free ports", n)
}
