//go:build linux

package main

import (
	"bytes"
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
	"github.com/hindsight-proxy/hindsight/store/weaviate"
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
	objects int64 // objects in its node status (flushed to disk segments only)
	held    int64 // experiences and delta objects an Aggregate through it counts
	rss     int64 // VmRSS, bytes
	peak    int64 // VmHWM, bytes
	disk    int64 // bytes under its data directory
}

// nodeStats reads every node's object counts (its node status, and an
// Aggregate of class and its delta class over the namespaces through
// it) and memory.
func nodeStats(ctx context.Context, c *weaviatetest.Cluster, class string, spaces int) ([]nodeStat, error) {
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
		for _, cl := range []string{class, class + "Delta"} {
			for j := range spaces {
				s.held += aggregateCount(ctx, n.URL, cl, weaviate.Tenant(namespaceOf(j)))
			}
		}
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

// aggregateCount returns the objects of class in tenant that an Aggregate
// through the node at base counts (0 when it has none or fails).
func aggregateCount(ctx context.Context, base, class, tenant string) int64 {
	q := fmt.Sprintf(`{Aggregate{%s(tenant:%q){meta{count}}}}`, class, tenant)
	body, _ := json.Marshal(map[string]string{"query": q})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/graphql", bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Aggregate map[string][]struct {
				Meta struct {
					Count int64 `json:"count"`
				} `json:"meta"`
			} `json:"Aggregate"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Data.Aggregate[class]) == 0 {
		return 0
	}
	return out.Data.Aggregate[class][0].Meta.Count
}
