package weaviatetest

import (
	"fmt"
	"os"
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
	c := &Cluster{}
	for range n {
		s, err := newServer(bin, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	var join []string
	for i, s := range c.Nodes {
		join = append(join, fmt.Sprintf("weaviate-%d:%d", i+1, s.ports["raft"]))
	}
	for i, s := range c.Nodes {
		s.env = []string{
			"CLUSTER_HOSTNAME=weaviate-" + strconv.Itoa(i+1),
			"CLUSTER_JOIN=127.0.0.1:" + strconv.Itoa(c.Nodes[0].ports["gossip"]),
			"RAFT_JOIN=" + strings.Join(join, ","),
			"RAFT_BOOTSTRAP_EXPECT=" + strconv.Itoa(n),
			"GOMEMLIMIT=512MiB",
		}
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
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.start()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start weaviate-%d: %v\n%s", i+1, err, c.Nodes[i].tail(4000))
		}
	}
	return c
}
