package reflect

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons an experience candidate is dropped before it is stored.
const (
	DropIncomplete    = "incomplete"     // no lesson or no situation
	DropNoSteps       = "no_steps"       // cites no step
	DropInventedStep  = "invented_step"  // cites a step the task does not have
	DropToolMismatch  = "tool_mismatch"  // names a tool none of its cited steps called
	DropLowConfidence = "low_confidence" // below the threshold, or not a number
	DropVague         = "vague"          // names no tool, argument, error or concrete rule
	DropStale         = "stale"          // contradicts a lesson backed by newer evidence
	DropContested     = "contested"      // contradicts a lesson that more tasks confirmed
	DropOneOff        = "one_off_value"  // quotes a value that belonged to its task only
)

// Metrics counts what reflection did. It is a prometheus.Collector; the
// daemon registers it on its registry. The zero value is not usable: call
// NewMetrics.
type Metrics struct {
	mu      sync.Mutex
	dropped map[string]int
	merged  map[string]int
	tasks   map[string]int

	droppedVec *prometheus.CounterVec
	mergedVec  *prometheus.CounterVec
	tasksVec   *prometheus.CounterVec
	redacted   prometheus.Counter
	llmCalls   prometheus.Counter
	llmTokens  prometheus.Counter
	llmErrors  *prometheus.CounterVec
}

// NewMetrics returns zeroed counters.
func NewMetrics() *Metrics {
	return &Metrics{
		dropped: map[string]int{},
		merged:  map[string]int{},
		tasks:   map[string]int{},
		droppedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hindsight_reflect_dropped_total",
			Help: "Experience candidates dropped by validation or merge, by reason.",
		}, []string{"reason"}),
		mergedVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hindsight_reflect_merged_total",
			Help: "Experiences stored, by outcome (added, reinforced, superseded).",
		}, []string{"outcome"}),
		tasksVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hindsight_reflect_tasks_total",
			Help: "Reflection attempts on tasks, by outcome (done, retry, failed).",
		}, []string{"outcome"}),
		redacted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hindsight_reflect_redactions_total",
			Help: "Secrets removed from experience candidates before storing.",
		}),
		llmCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hindsight_reflect_llm_requests_total",
			Help: "HTTP requests made to the LLM endpoint, retries included.",
		}),
		llmTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hindsight_reflect_llm_tokens_total",
			Help: "Tokens used by reflection (prompt and completion).",
		}),
		llmErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hindsight_reflect_llm_errors_total",
			Help: "Failed LLM reflections, by kind.",
		}, []string{"kind"}),
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.droppedVec, m.mergedVec, m.tasksVec, m.redacted, m.llmCalls, m.llmTokens, m.llmErrors}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *Metrics) drop(reason string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.dropped[reason]++
	m.mu.Unlock()
	m.droppedVec.WithLabelValues(reason).Inc()
}

func (m *Metrics) merge(outcome string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.merged[outcome]++
	m.mu.Unlock()
	m.mergedVec.WithLabelValues(outcome).Inc()
}

func (m *Metrics) task(outcome string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.tasks[outcome]++
	m.mu.Unlock()
	m.tasksVec.WithLabelValues(outcome).Inc()
}

func (m *Metrics) redaction(n int) {
	if m == nil || n == 0 {
		return
	}
	m.redacted.Add(float64(n))
}

// LLMRequest counts one request sent to the model; LLMUsage counts the
// tokens it used and LLMError a failed answer by kind. All are no-ops on a
// nil *Metrics, as are the other counters.
func (m *Metrics) LLMRequest() {
	if m != nil {
		m.llmCalls.Inc()
	}
}

func (m *Metrics) LLMUsage(tokens int) {
	if m != nil && tokens > 0 {
		m.llmTokens.Add(float64(tokens))
	}
}

func (m *Metrics) LLMError(kind string) {
	if m != nil {
		m.llmErrors.WithLabelValues(kind).Inc()
	}
}

// Dropped returns the number of candidates dropped so far, by reason.
func (m *Metrics) Dropped() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.dropped)
}

// Merged returns the number of experiences stored so far, by outcome:
// "added", "reinforced" or "superseded".
func (m *Metrics) Merged() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.merged)
}

// Tasks returns the number of reflection attempts so far, by outcome:
// "done", "retry" or "failed".
func (m *Metrics) Tasks() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.tasks)
}
