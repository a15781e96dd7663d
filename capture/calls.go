package capture

import (
	"sort"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/prometheus/client_golang/prometheus"
)

// CallLatencyBuckets are the upper bounds, in seconds, of the latency
// histogram in hindsight.CallStat.
var CallLatencyBuckets = prometheus.DefBuckets

// maxCallKeys bounds the tools counted apart; past it they count as
// otherTool.
const (
	maxCallKeys = 512
	otherTool   = "(other)"
)

// callCounters count recorded steps by tool and failures by error code.
type callCounters struct {
	mu       sync.Mutex
	calls    map[string]*hindsight.CallStat
	failures map[string]uint64
}

// observe counts the step s.
func (c *callCounters) observe(s *hindsight.Step) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count(s)
}

// observeAll counts the steps of batch, under one lock.
func (c *callCounters) observeAll(batch []hindsight.Step) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range batch {
		c.count(&batch[i])
	}
}

// count counts the step s. c.mu is held.
func (c *callCounters) count(s *hindsight.Step) {
	tool := s.Tool
	if tool == "" {
		tool = s.Method
	}
	secs := s.LatencyMS / 1000
	if c.calls == nil {
		c.calls, c.failures = map[string]*hindsight.CallStat{}, map[string]uint64{}
	}
	st := c.calls[tool]
	if st == nil {
		if len(c.calls) >= maxCallKeys {
			tool = otherTool
			st = c.calls[tool]
		}
		if st == nil {
			st = &hindsight.CallStat{Tool: tool, LatencyBuckets: make([]uint64, len(CallLatencyBuckets))}
			c.calls[tool] = st
		}
	}
	st.Count++
	st.LatencySum += secs
	for i, b := range CallLatencyBuckets {
		if secs <= b {
			st.LatencyBuckets[i]++
		}
	}
	if s.Failed() {
		st.Failures++
		code := s.ErrorCode
		if code == "" {
			code = string(s.CausalTag)
		}
		if len(c.failures) < maxCallKeys || c.failures[code] > 0 {
			c.failures[code]++
		} else {
			c.failures[otherTool]++
		}
	}
}

// snapshot copies the counters: calls sorted by tool, failures by code.
func (c *callCounters) snapshot() ([]hindsight.CallStat, map[string]uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := make([]hindsight.CallStat, 0, len(c.calls))
	for _, st := range c.calls {
		cp := *st
		cp.LatencyBuckets = append([]uint64(nil), st.LatencyBuckets...)
		calls = append(calls, cp)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].Tool < calls[j].Tool })
	failures := make(map[string]uint64, len(c.failures))
	for k, v := range c.failures {
		failures[k] = v
	}
	return calls, failures
}

// Calls returns the recorded steps counted by tool, and the failed ones by
// error code (their causal tag when they have none).
func (r *Recorder) Calls() ([]hindsight.CallStat, map[string]uint64) { return r.calls.snapshot() }
