package capture

import (
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// TestCallCounters: steps count by tool (the method when no tool), with a
// cumulative latency histogram, and failures by error code or tag.
func TestCallCounters(t *testing.T) {
	var c callCounters
	c.observe(&hindsight.Step{Method: "tools/call", Tool: "read", LatencyMS: 3, CausalTag: hindsight.TagSuccess})
	c.observe(&hindsight.Step{Method: "tools/call", Tool: "read", LatencyMS: 2000, CausalTag: hindsight.TagFailure, IsError: true, ErrorCode: "404"})
	c.observe(&hindsight.Step{Method: "tools/list", LatencyMS: 1, CausalTag: hindsight.TagSuccess})
	c.observe(&hindsight.Step{Method: "tools/call", Tool: "slow", LatencyMS: 30000, CausalTag: hindsight.TagTimeout})
	calls, failures := c.snapshot()
	if len(calls) != 3 || calls[0].Tool != "read" || calls[1].Tool != "slow" || calls[2].Tool != "tools/list" {
		t.Fatalf("calls %+v", calls)
	}
	read := calls[0]
	if read.Count != 2 || read.Failures != 1 || read.LatencySum != 2.003 {
		t.Errorf("read: %+v", read)
	}
	// 3 ms is under every bound from 5 ms; 2 s under those from 2.5 s.
	for i, b := range CallLatencyBuckets {
		want := uint64(1)
		if b >= 2.5 {
			want = 2
		}
		if read.LatencyBuckets[i] != want {
			t.Errorf("bucket le=%v: %d, want %d", b, read.LatencyBuckets[i], want)
		}
	}
	if calls[1].LatencyBuckets[len(CallLatencyBuckets)-1] != 0 {
		t.Error("30 s counted under the 10 s bound")
	}
	if failures["404"] != 1 || failures["timeout"] != 1 || len(failures) != 2 {
		t.Errorf("failures %v", failures)
	}
}
