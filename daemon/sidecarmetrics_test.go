package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSidecarReports: the daemon sums the sidecars' latest reports by
// server; a later report of a sidecar replaces its earlier one; a server
// none of whose sidecars refused a body has no refusals series.
func TestSidecarReports(t *testing.T) {
	s := &Server{Tick: time.Hour}
	c := startServer(t, s)
	ctx := context.Background()
	buckets := func(n uint64) []uint64 {
		b := make([]uint64, len(SidecarLatencyBuckets))
		for i := range b {
			b[i] = n
		}
		return b
	}
	reports := []SidecarReport{
		{Source: "a", Server: "fs", Steps: 1, Calls: []hindsight.CallStat{{Tool: "read", Count: 1, LatencySum: 0.001, LatencyBuckets: buckets(1)}}},
		{Source: "a", Server: "fs", Steps: 3, Redactions: 2, Calls: []hindsight.CallStat{{Tool: "read", Count: 3, Failures: 1, LatencySum: 0.003, LatencyBuckets: buckets(3)}},
			Failures: map[string]uint64{"-32602": 1}},
		{Source: "b", Server: "fs", Steps: 2, Dropped: 1, Calls: []hindsight.CallStat{{Tool: "read", Count: 2, LatencySum: 0.002, LatencyBuckets: buckets(2)}}},
		{Source: "c", Server: "web", Steps: 5, Spilled: 4, BodiesRefused: 3},
		{Source: "d", Server: "web", BodiesRefused: 2},
	}
	for _, r := range reports {
		if err := c.ReportSidecar(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ReportSidecar(ctx, SidecarReport{Server: "x"}); !errors.Is(err, ErrRejected) {
		t.Errorf("a report without source: %v, want rejected", err)
	}
	want := `
# HELP hindsight_sidecar_steps_recorded_total Steps recorded by the sidecars, as they reported.
# TYPE hindsight_sidecar_steps_recorded_total counter
hindsight_sidecar_steps_recorded_total{server="fs"} 5
hindsight_sidecar_steps_recorded_total{server="web"} 5
# HELP hindsight_sidecar_calls_total Recorded steps by tool (the method for a step that is no tool call).
# TYPE hindsight_sidecar_calls_total counter
hindsight_sidecar_calls_total{server="fs",tool="read"} 5
# HELP hindsight_sidecar_call_failures_total Failed calls by error code (the causal tag when there is none).
# TYPE hindsight_sidecar_call_failures_total counter
hindsight_sidecar_call_failures_total{code="-32602",server="fs"} 1
# HELP hindsight_sidecar_steps_spilled_total Steps the sidecars wrote to their disk outbox (the daemon had not acknowledged them in time).
# TYPE hindsight_sidecar_steps_spilled_total counter
hindsight_sidecar_steps_spilled_total{server="fs"} 0
hindsight_sidecar_steps_spilled_total{server="web"} 4
# HELP hindsight_sidecar_bodies_refused_total Requests hindsight serve refused with 503 because the request bodies in flight were over its --body-budget.
# TYPE hindsight_sidecar_bodies_refused_total counter
hindsight_sidecar_bodies_refused_total{server="web"} 5
`
	if err := testutil.GatherAndCompare(s.Registry, strings.NewReader(want),
		"hindsight_sidecar_steps_recorded_total", "hindsight_sidecar_calls_total",
		"hindsight_sidecar_call_failures_total", "hindsight_sidecar_steps_spilled_total", "hindsight_sidecar_bodies_refused_total"); err != nil {
		t.Error(err)
	}
	n, err := testutil.GatherAndCount(s.Registry, "hindsight_sidecar_call_latency_seconds")
	if err != nil || n != 1 {
		t.Errorf("latency histograms: %d, %v; want 1", n, err)
	}
}
