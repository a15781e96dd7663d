package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/bench"
	"github.com/hindsight-proxy/hindsight/lab/testkit/weaviatetest"
)

// Which node the run kills (-kill).
const (
	killWrites = "writes" // weaviate-1: the node daemons 0, 3, 6 … write through
	killLeader = "leader" // the metadata (schema) Raft leader
	killNone   = "none"
)

// getJSON decodes the answer to GET url into v.
func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", url, err)
	}
	return nil
}

// leader returns the index of the node that leads the metadata Raft
// group, as node i's /v1/cluster/statistics tells.
func leader(ctx context.Context, c *weaviatetest.Cluster, i int) (int, error) {
	var st struct {
		Statistics []struct {
			Name     string `json:"name"`
			LeaderID string `json:"leaderId"`
			Raft     struct {
				State string `json:"state"`
			} `json:"raft"`
		} `json:"statistics"`
	}
	if err := getJSON(ctx, c.Nodes[i].URL+"/v1/cluster/statistics", &st); err != nil {
		return 0, fmt.Errorf("find the raft leader: %w", err)
	}
	name := ""
	for _, s := range st.Statistics {
		if s.LeaderID != "" {
			name = s.LeaderID
		}
		if strings.EqualFold(s.Raft.State, "leader") {
			name = s.Name
			break
		}
	}
	for j := range c.Nodes {
		if name == fmt.Sprintf("weaviate-%d", j+1) {
			return j, nil
		}
	}
	return 0, fmt.Errorf("find the raft leader: no node named %q", name)
}

// victim returns the node the run kills for mode.
func victim(ctx context.Context, c *weaviatetest.Cluster, mode string) (int, error) {
	if mode == killLeader {
		return leader(ctx, c, 1)
	}
	return 0, nil
}

// nodeStat is one node's size after the run.
type nodeStat struct {
	name    string
	objects int64
	rss     int64 // VmRSS, bytes
	peak    int64 // VmHWM, bytes
	disk    int64 // bytes under its data directory
}

// nodeStats reads every node's object count (/v1/nodes) and memory.
func nodeStats(ctx context.Context, c *weaviatetest.Cluster) ([]nodeStat, error) {
	var nodes struct {
		Nodes []struct {
			Name  string `json:"name"`
			Stats struct {
				ObjectCount int64 `json:"objectCount"`
			} `json:"stats"`
		} `json:"nodes"`
	}
	if err := getJSON(ctx, c.Nodes[0].URL+"/v1/nodes?output=verbose", &nodes); err != nil {
		return nil, fmt.Errorf("read node stats: %w", err)
	}
	count := map[string]int64{}
	for _, n := range nodes.Nodes {
		count[n.Name] = n.Stats.ObjectCount
	}
	var out []nodeStat
	for i, n := range c.Nodes {
		name := fmt.Sprintf("weaviate-%d", i+1)
		s := nodeStat{name: name, objects: count[name], disk: dirSize(n.DataDir)}
		if pid := n.PID(); pid != 0 {
			s.rss, _ = bench.ProcStatus(pid, "VmRSS")
			s.peak, _ = bench.ProcStatus(pid, "VmHWM")
		}
		out = append(out, s)
	}
	return out, nil
}

// dirSize returns the bytes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
