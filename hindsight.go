// Package hindsight holds the domain types shared by every part of the
// Hindsight sidecar and daemon: steps recorded by the proxy, the tasks they
// form, and the experiences distilled from them.
//
// The JSON field names are part of the command line's contract (see the
// README): scripts read them from --json output and from exports.
package hindsight

import (
	"encoding/json"
	"strings"
	"time"
)

// CausalTag says what role a step played in its task.
type CausalTag string

// The causal tags, from the design's data model.
const (
	TagSuccess   CausalTag = "success"   // the call did what was asked
	TagFailure   CausalTag = "failure"   // isError result or JSON-RPC error
	TagTimeout   CausalTag = "timeout"   // no answer in time, or the error says it timed out
	TagCancelled CausalTag = "cancelled" // the client cancelled the request
	TagRecovery  CausalTag = "recovery"  // success after a failure of the same tool in the task
	TagRetry     CausalTag = "retry"     // the same call (tool and arguments) repeated
)

// Direction says which side sent the request of a step.
type Direction string

// Directions of a step's request.
const (
	ClientToServer Direction = "client" // agent → MCP server (tools/call, resources/read…)
	ServerToClient Direction = "server" // MCP server → agent (sampling, elicitation, roots…)
)

// RPCError is a JSON-RPC error object as it appeared on the wire.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Truncation records a body that was shortened before it was stored.
type Truncation struct {
	Field        string `json:"field"`         // "arguments", "result", "request" or "response"
	OriginalSize int    `json:"original_size"` // bytes before truncation (after redaction)
	SHA256       string `json:"sha256"`        // hex digest of the original (redacted) bytes
}

// Injection records text that Hindsight added to what the agent saw.
type Injection struct {
	Channel       string   `json:"channel"`                  // "instructions", "error_result" or "query_hindsight"
	ExperienceIDs []string `json:"experience_ids,omitempty"` // the experiences shown
	Tokens        int      `json:"tokens"`                   // tokens injected
}

// Step is one request/response pair seen by a sidecar.
//
// Source and Seq identify a step uniquely across redeliveries: Source is the
// sidecar's outbox id, Seq a gap-free counter within it. TaskID and StepIndex
// are assigned by the daemon when it segments steps into tasks, unless the
// agent named the task explicitly (ExplicitTask).
//
// Step is a data record with one field per member of its JSON form (the
// wire format), so it is wide and flat.
type Step struct {
	TaskID          string          `json:"task_id"`
	SessionID       string          `json:"session_id"`
	Server          string          `json:"server"`
	StepIndex       int             `json:"step_index"`
	StartedAt       time.Time       `json:"started_at"`
	EndedAt         time.Time       `json:"ended_at"`
	LatencyMS       float64         `json:"latency_ms"`
	Direction       Direction       `json:"direction"`
	Method          string          `json:"method"`
	Tool            string          `json:"tool,omitempty"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	IsError         bool            `json:"is_error"`
	Error           *RPCError       `json:"error,omitempty"`
	ErrorCode       string          `json:"error_code,omitempty"`
	CausalTag       CausalTag       `json:"causal_tag"`
	Redactions      int             `json:"redactions"`
	Injected        []Injection     `json:"injected,omitempty"`
	Notifications   int             `json:"notifications"`
	Truncated       []Truncation    `json:"truncated,omitempty"`
	Local           bool            `json:"local,omitempty"` // answered by the sidecar, not the server
	ClientName      string          `json:"client_name,omitempty"`
	ClientVersion   string          `json:"client_version,omitempty"`
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	Request         json.RawMessage `json:"request,omitempty"`  // redacted JSON-RPC request as relayed
	Response        json.RawMessage `json:"response,omitempty"` // redacted JSON-RPC response as relayed
	ExplicitTask    string          `json:"explicit_task,omitempty"`
	HostPID         int             `json:"host_pid,omitempty"` // agent host process of a stdio sidecar
	Transport       string          `json:"transport,omitempty"`
	Source          string          `json:"source"`
	Seq             uint64          `json:"seq"`
	// ErrorTemplate is, for a failed tools/call step, the template of its
	// error text with the variable parts masked ("user <*> not found"), as
	// the daemon's template miner knows it when the step is read. The
	// sidecar never sets it.
	ErrorTemplate string `json:"error_template,omitempty"`
	// Namespace is where the lessons about this step's server go and are
	// injected from, when its sidecar was started with --namespace; ""
	// means the configuration's (store.namespaces, store.namespace).
	Namespace string `json:"namespace,omitempty"`
}

// Failed reports whether the step counts as a failure of its call.
func (s *Step) Failed() bool {
	switch s.CausalTag {
	case TagFailure, TagTimeout:
		return true
	}
	return s.IsError || s.Error != nil
}

// Task is the steps of one agent run.
type Task struct {
	ID           string    `json:"id"`
	StartedAt    time.Time `json:"started_at"`
	EndedAt      time.Time `json:"ended_at"`
	Final        bool      `json:"final"`
	Servers      []string  `json:"servers"`
	StepCount    int       `json:"step_count"`
	FailureCount int       `json:"failure_count"`
	Reflection   string    `json:"reflection,omitempty"` // "", "pending", "done" or "failed"
	Steps        []Step    `json:"steps,omitempty"`
}

// Experience is a reusable lesson distilled from a task. It is a data
// record with one field per member of its JSON form (stored, exported and
// served), so it is wide and flat.
type Experience struct {
	ID            string     `json:"id"`
	Version       int        `json:"version"`
	Namespace     string     `json:"namespace"`
	Server        string     `json:"server"`
	Tool          string     `json:"tool"`
	TaskType      string     `json:"task_type"`
	ErrorCode     string     `json:"error_code"`
	Situation     string     `json:"situation"`
	Action        string     `json:"action"`
	Result        string     `json:"result"`
	Lesson        string     `json:"lesson"`
	Confidence    float64    `json:"confidence"`
	SourceTask    string     `json:"source_task"`
	SourceSteps   []int      `json:"source_steps"`
	EvidenceCount int        `json:"evidence_count"`
	HitCount      int        `json:"hit_count"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	LastHitAt     *time.Time `json:"last_hit_at"`
	SupersededBy  string     `json:"superseded_by"`
	Deleted       bool       `json:"deleted"`
	SourceAgent   string     `json:"source_agent"`
	// SourceMachine is where the lesson was learnt: "HOST/DAEMON", the
	// machine's host name and a short id of the daemon (of its home
	// directory, so two daemons on one machine differ); "" for lessons
	// imported or stored before it was recorded.
	SourceMachine string `json:"source_machine,omitempty"`
	// Origin says who wrote the lesson: "rules", "llm" (or "llm:MODEL"),
	// "import" (or "import:PACK") or "manual".
	Origin string `json:"origin"`
	// ErrorTemplate is the error template the experience is about, with
	// variable parts masked ("payment of <*> declined: card <*> expired");
	// "" for a lesson not about one error. Injection on an error result
	// requires it to match the error at hand.
	ErrorTemplate string `json:"error_template"`
	// CounterCount counts counter-evidence: tasks where the lesson was
	// shown (or its precondition held) and the same error happened anyway.
	CounterCount int `json:"counter_count"`
	// EvidenceTasks are the tasks counted in EvidenceCount, the latest
	// MaxEvidenceTasks of them, so that a task reflected on again does not
	// count twice.
	EvidenceTasks []string  `json:"evidence_tasks,omitempty"`
	Embedder      string    `json:"embedder,omitempty"` // name and dimension of the embedder that made Vector
	Vector        []float32 `json:"-"`

	// ImportedEvidence is the evidence count an imported pack claimed, kept
	// for display only: an import starts with no evidence of its own
	// (EvidenceCount 0) until local tasks confirm the lesson.
	ImportedEvidence int `json:"imported_evidence,omitempty"`

	// Pinned lessons are offered to the instruction injection of their
	// server whatever their rank and confidence (a person pinned them in
	// the web UI); a forgotten or superseded one is not.
	Pinned bool `json:"pinned,omitempty"`
}

// ImportConfidenceCap is the highest confidence an imported experience
// gets unless the import is trusted (`experiences import --trust`). It is
// below the confidence reflection requires of a lesson (0.6), so an
// imported lesson ranks below the local ones until local evidence
// confirms it (reflection merging a local lesson into it raises it).
const ImportConfidenceCap = 0.5

// Unconfirmed reports whether e is an untrusted import no local task has
// confirmed yet: imported (origin "import…") without --trust, so its
// confidence is at most ImportConfidenceCap, with no local evidence, and
// not pinned by a person. Such a lesson is told to no agent, on any
// channel, until reflection of a local task that shows the same recovery
// merges into it and counts the evidence.
func (e *Experience) Unconfirmed() bool {
	return strings.HasPrefix(e.Origin, "import") && e.EvidenceCount == 0 && e.Confidence <= ImportConfidenceCap && !e.Pinned
}

// MaxEvidenceTasks bounds Experience.EvidenceTasks.
const MaxEvidenceTasks = 32

// DefaultNamespace is the namespace of experiences when none is configured.
const DefaultNamespace = "default"

// CallStat counts the recorded steps of one tool (or, for a step that is no
// tool call, its method): what a sidecar reports to the daemon, which sums
// the reports of every sidecar into its metrics.
type CallStat struct {
	Tool       string  `json:"tool"`
	Count      uint64  `json:"count"`
	Failures   uint64  `json:"failures"`
	LatencySum float64 `json:"latency_sum_seconds"`
	// LatencyBuckets are cumulative counts, one per bound of the latency
	// histogram (Prometheus' default buckets, in seconds).
	LatencyBuckets []uint64 `json:"latency_buckets"`
}
