package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/toolpin"
	"github.com/prometheus/client_golang/prometheus"
)

// handleTools answers GET /v1/tools: every server's pinned tools as the
// sidecars recorded them under the home (package toolpin), for the UI.
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	files, err := toolpin.List(s.Home)
	if err != nil && len(files) == 0 {
		s.fail(w, r, err)
		return
	}
	if files == nil {
		files = []*toolpin.File{}
	}
	writeJSON(w, http.StatusOK, files)
}

// ToolApproval is the body of POST /v1/tools/approve.
type ToolApproval struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

// handleApproveTool answers POST /v1/tools/approve: the version of the
// tool last listed is pinned (toolpin.Approve), as `hindsight tools
// approve` does; 404 for a tool never listed.
func (s *Server) handleApproveTool(w http.ResponseWriter, r *http.Request) {
	var req ToolApproval
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := toolpin.Approve(s.Home, req.Server, req.Tool, time.Now())
	if errors.Is(err, toolpin.ErrUnknownTool) {
		err = fmt.Errorf("%w: %w", hindsight.ErrNotFound, err)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.Logger.Info("tool approved", "server", req.Server, "tool", req.Tool, "hash", toolpin.Short(t.Current))
	writeJSON(w, http.StatusOK, t)
}

// ApproveTool pins the version of server's tool last listed (POST
// /v1/tools/approve).
func (c *Client) ApproveTool(ctx context.Context, server, tool string) (*toolpin.Tool, error) {
	var t toolpin.Tool
	if err := c.call(ctx, http.MethodPost, "/tools/approve", nil, ToolApproval{Server: server, Tool: tool}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Tools returns every server's pinned tools (GET /v1/tools).
func (c *Client) Tools(ctx context.Context) ([]*toolpin.File, error) {
	var files []*toolpin.File
	err := c.call(ctx, http.MethodGet, "/tools", nil, nil, &files)
	return files, err
}

// toolsCollector serves hindsight_tools, the tools the sidecars pinned by
// server and state, read from the pin files when scraped.
type toolsCollector struct{ home hindsight.Home }

var toolsDesc = prometheus.NewDesc("hindsight_tools",
	"Tools the servers listed, by server and state: pinned, changed (since the version approved) or flagged (description fails validation).",
	[]string{"server", "state"}, nil)

func (c toolsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- toolsDesc }

func (c toolsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.home == "" {
		return
	}
	files, _ := toolpin.List(c.home)
	for _, f := range files {
		counts := map[string]int{toolpin.StatePinned: 0, toolpin.StateChanged: 0, toolpin.StateFlagged: 0}
		for _, t := range f.Tools {
			counts[t.State()]++
		}
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(toolsDesc, prometheus.GaugeValue, float64(n), f.Server, state)
		}
	}
}
