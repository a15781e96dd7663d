package daemon

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/prometheus/client_golang/prometheus"
)

// SidecarLatencyBuckets are the upper bounds, in seconds, of the call
// latency histogram (capture.CallLatencyBuckets).
var SidecarLatencyBuckets = prometheus.DefBuckets

// SidecarReport is the body of POST /v1/sidecars/report: a sidecar's
// counters since it started, posted every few seconds and when it stops.
// The daemon serves their sums by server at GET /metrics.
type SidecarReport struct {
	Source     string `json:"source"` // the sidecar's outbox id
	Server     string `json:"server"`
	PID        int    `json:"pid"`
	Steps      int64  `json:"steps"`      // steps recorded
	Spilled    int64  `json:"spilled"`    // steps written to the disk outbox
	Dropped    int64  `json:"dropped"`    // exchanges lost
	Redactions int64  `json:"redactions"` // secrets replaced
	// BodiesRefused counts the requests `serve` refused (503) because the
	// request bodies in flight were over its budget.
	BodiesRefused int64                `json:"bodies_refused,omitempty"`
	Calls         []hindsight.CallStat `json:"calls,omitempty"`
	Failures      map[string]uint64    `json:"failures,omitempty"` // failed calls by error code
}

// maxSidecarReports bounds the sidecars whose counters the daemon keeps
// (those of stopped sidecars too, so that the sums never fall back); past
// it the stalest are forgotten.
const maxSidecarReports = 1024

// sidecarMetrics keeps the latest report of each sidecar and exposes
// their sums as hindsight_sidecar_* metrics.
type sidecarMetrics struct {
	mu      sync.Mutex
	reports map[string]sidecarEntry

	steps, spilled, dropped, redactions, refused, calls, failures, latency *prometheus.Desc
}

type sidecarEntry struct {
	r  SidecarReport
	at time.Time
}

func newSidecarMetrics() *sidecarMetrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &sidecarMetrics{
		reports:    map[string]sidecarEntry{},
		steps:      d("hindsight_sidecar_steps_recorded_total", "Steps recorded by the sidecars, as they reported.", "server"),
		spilled:    d("hindsight_sidecar_steps_spilled_total", "Steps the sidecars wrote to their disk outbox (the daemon had not acknowledged them in time).", "server"),
		dropped:    d("hindsight_sidecar_steps_dropped_total", "Exchanges the sidecars could not record.", "server"),
		redactions: d("hindsight_sidecar_redactions_total", "Secrets the sidecars replaced.", "server"),
		refused:    d("hindsight_sidecar_bodies_refused_total", "Requests hindsight serve refused with 503 because the request bodies in flight were over its --body-budget.", "server"),
		calls:      d("hindsight_sidecar_calls_total", "Recorded steps by tool (the method for a step that is no tool call).", "server", "tool"),
		failures:   d("hindsight_sidecar_call_failures_total", "Failed calls by error code (the causal tag when there is none).", "server", "code"),
		latency:    d("hindsight_sidecar_call_latency_seconds", "Latency of the recorded calls.", "server", "tool"),
	}
}

func (m *sidecarMetrics) put(r SidecarReport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reports[r.Source] = sidecarEntry{r: r, at: time.Now()}
	if len(m.reports) > maxSidecarReports {
		var stalest string
		var at time.Time
		for k, e := range m.reports {
			if stalest == "" || e.at.Before(at) {
				stalest, at = k, e.at
			}
		}
		delete(m.reports, stalest)
	}
}

// Describe describes nothing: the collector is unchecked (its label
// values come and go with the sidecars).
func (m *sidecarMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect sends the reports' sums by server (and tool, or error code).
func (m *sidecarMetrics) Collect(ch chan<- prometheus.Metric) {
	type hist struct {
		count, failures uint64
		sum             float64
		buckets         []uint64
	}
	type key struct{ server, name string }
	steps, spilled, dropped, redactions, refused := map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	calls, failures := map[key]*hist{}, map[key]uint64{}
	m.mu.Lock()
	for _, e := range m.reports {
		r := e.r
		steps[r.Server] += float64(r.Steps)
		spilled[r.Server] += float64(r.Spilled)
		dropped[r.Server] += float64(r.Dropped)
		redactions[r.Server] += float64(r.Redactions)
		if r.BodiesRefused > 0 {
			refused[r.Server] += float64(r.BodiesRefused)
		}
		for _, c := range r.Calls {
			if len(c.LatencyBuckets) != len(SidecarLatencyBuckets) {
				continue // another binary's buckets
			}
			h := calls[key{r.Server, c.Tool}]
			if h == nil {
				h = &hist{buckets: make([]uint64, len(SidecarLatencyBuckets))}
				calls[key{r.Server, c.Tool}] = h
			}
			h.count += c.Count
			h.failures += c.Failures
			h.sum += c.LatencySum
			for i, n := range c.LatencyBuckets {
				h.buckets[i] += n
			}
		}
		for code, n := range r.Failures {
			failures[key{r.Server, code}] += n
		}
	}
	m.mu.Unlock()
	for _, f := range []struct {
		desc *prometheus.Desc
		vals map[string]float64
	}{{m.steps, steps}, {m.spilled, spilled}, {m.dropped, dropped}, {m.redactions, redactions}, {m.refused, refused}} {
		for server, v := range f.vals {
			ch <- prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, v, server)
		}
	}
	keys := make([]key, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].server+"\x00"+keys[i].name < keys[j].server+"\x00"+keys[j].name })
	for _, k := range keys {
		h := calls[k]
		ch <- prometheus.MustNewConstMetric(m.calls, prometheus.CounterValue, float64(h.count), k.server, k.name)
		b := make(map[float64]uint64, len(h.buckets))
		for i, n := range h.buckets {
			b[SidecarLatencyBuckets[i]] = n
		}
		ch <- prometheus.MustNewConstHistogram(m.latency, h.count, h.sum, b, k.server, k.name)
	}
	for k, n := range failures {
		ch <- prometheus.MustNewConstMetric(m.failures, prometheus.CounterValue, float64(n), k.server, k.name)
	}
}

func (s *Server) handleSidecarReport(w http.ResponseWriter, r *http.Request) {
	var rep SidecarReport
	if err := decodeBody(w, r, &rep); err != nil {
		s.fail(w, r, err)
		return
	}
	if rep.Source == "" {
		s.fail(w, r, badRequest("a sidecar report needs its source"))
		return
	}
	s.m.sidecars.put(rep)
	writeJSON(w, http.StatusOK, struct{}{})
}

// ReportSidecar posts a sidecar's counters to the daemon.
func (c *Client) ReportSidecar(ctx context.Context, r SidecarReport) error {
	return c.call(ctx, http.MethodPost, "/sidecars/report", nil, r, nil)
}
