package daemon

import (
	"context"
	"net/http"

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
