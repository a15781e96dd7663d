package weaviatetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Cluster is a running multi-node Weaviate: nodes weaviate-1 … weaviate-n
// on loopback, joined by gossip to the first and forming one Raft group.
type Cluster struct {
	Nodes []*Server
}

// StartCluster runs an n-node Weaviate cluster with new data directories and
// stops it when t ends. Unlike Start it skips the test, with the command
// that installs it, when the binary is missing: a cluster test is an extra
// that a machine without the binary does without (CI has it).
//
// Each node has its own gossip, data, Raft, Raft RPC, gRPC, HTTP and
// profiling ports; CLUSTER_JOIN names the first node's gossip port and
// RAFT_JOIN every node, with RAFT_BOOTSTRAP_EXPECT=n. The nodes start
// together (Raft waits for all of them) and are ready in about 8 s.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("weaviate-server not found at %s (%v); skipping the %d-node cluster test. Install it with:\n"+
			"  GOBIN=$HOME/.cache/hindsight/bin go install github.com/weaviate/weaviate/cmd/weaviate-server@%s\n"+
			"or set HINDSIGHT_WEAVIATE_BIN", bin, err, n, Version)
	}
	c, err := newCluster(n, func() string { return t.TempDir() }, []string{"GOMEMLIMIT=512MiB"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i, s := range c.Nodes {
			if err := s.Stop(); err != nil {
				t.Errorf("stop weaviate-%d: %v", i+1, err)
			}
			if t.Failed() {
				t.Logf("weaviate-%d log (tail):\n%s", i+1, s.tail(3000))
			}
		}
	})
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// LaunchCluster runs an n-node cluster as StartCluster does, outside a
// test (a benchmark command): each node's data directory is dir/weaviate-i,
// and env is added to every node's environment (e.g. GOMEMLIMIT). Stop
// ends it.
func LaunchCluster(n int, dir string, env []string) (*Cluster, error) {
	if _, err := os.Stat(Binary()); err != nil {
		return nil, fmt.Errorf("launch cluster: weaviate-server not found at %s: %w", Binary(), err)
	}
	i := 0
	c, err := newCluster(n, func() string {
		i++
		return filepath.Join(dir, "weaviate-"+strconv.Itoa(i))
	}, env)
	if err != nil {
		return nil, fmt.Errorf("launch cluster: %w", err)
	}
	if err := c.start(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("launch cluster: %w", err)
	}
	return c, nil
}

// newCluster prepares (without starting) n nodes over the directories dir
// returns.
func newCluster(n int, dir func() string, env []string) (*Cluster, error) {
	bin := Binary()
	c := &Cluster{}
	for range n {
		d := dir()
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("make data dir: %w", err)
		}
		s, err := newServer(bin, d, nil)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	var join []string
	for i, s := range c.Nodes {
		join = append(join, fmt.Sprintf("weaviate-%d:%d", i+1, s.ports["raft"]))
	}
	for i, s := range c.Nodes {
		s.env = append([]string{
			"CLUSTER_HOSTNAME=weaviate-" + strconv.Itoa(i+1),
			"CLUSTER_JOIN=127.0.0.1:" + strconv.Itoa(c.Nodes[0].ports["gossip"]),
			"RAFT_JOIN=" + strings.Join(join, ","),
			"RAFT_BOOTSTRAP_EXPECT=" + strconv.Itoa(n),
		}, env...)
	}
	return c, nil
}

// start starts every node at once (Raft waits for all of them).
func (c *Cluster) start() error {
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, s := range c.Nodes {
		wg.Go(func() { errs[i] = s.start() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("start weaviate-%d: %w\n%s", i+1, err, c.Nodes[i].tail(4000))
		}
	}
	return nil
}

// Stop stops every node; it is safe to call more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for i, s := range c.Nodes {
		if err := s.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop weaviate-%d: %w", i+1, err))
		}
	}
	return errors.Join(errs...)
}
