package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/memory"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/hindsight-proxy/hindsight/toolpin"
	"github.com/hindsight-proxy/hindsight/traces"
)

// The daemon's HTTP API, served on its Unix socket. Bodies are JSON with the
// hindsight types; exports are JSON Lines. Errors are {"error": "…"} with a
// status code: 400 bad input, 404 unknown id, 409 version conflict, 503 a
// part of the daemon that is not configured (no experience store, no
// reflection). A write to the experience store (forget, restore, edit,
// pin, purge) that the daemon queued because the store is unreachable is
// answered 202 with a QueuedResult; it is applied, in order, once the
// store is back.
//
//	GET  /v1/health                      Health
//	GET  /v1/status                      Status
//	POST /v1/steps                       StepBatch → IngestResult
//	POST /v1/steps/compact               the same; steps may be compact (wire.AppendCompactStep)
//	POST /v1/sessions/close              SessionClose → SessionCloseResult
//	GET  /v1/tasks?final=&limit=         []hindsight.Task (no steps), newest first
//	POST /v1/tasks/final                 FinalRequest → FinalResult (the agent says a task is finished)
//	POST /v1/episodes                    Episode → EpisodeResult (an agent's step outside MCP)
//	GET  /v1/tasks/{id}                  hindsight.Task with steps
//	GET  /v1/export?task=ID…             steps, JSON Lines, tasks oldest first
//	POST /v1/traces/import               StepBatch of an export → IngestResult (traces.Store.Import)
//	POST /v1/tasks/purge                 PurgeTasksRequest → PurgeResult (erased for good)
//	GET  /v1/experiences?namespace=&server=&tool=&origin=&agent=&deleted=1&superseded=1&limit=
//	GET  /v1/experiences/rejected?limit= → []Rejection (lessons reflection refused, newest first)
//	                                     []hindsight.Experience
//	POST /v1/experiences/search          SearchRequest (a hindsight.Query, with origin and
//	                                     source_agent filters; include_pinned puts the server's
//	                                     pinned ones first) → []hindsight.ScoredExperience
//	GET  /v1/experiences/{id}?namespace= hindsight.Experience
//	POST /v1/experiences/{id}/forget     hindsight.Experience (soft-deleted)
//	POST /v1/experiences/{id}/restore    hindsight.Experience
//	POST /v1/experiences/{id}/edit       EditRequest → hindsight.Experience (next version, origin "manual")
//	POST /v1/experiences/{id}/pin        PinRequest → hindsight.Experience
//	POST /v1/ui                          → UIInfo (starts the web UI unless it runs)
//	POST /v1/sidecars/report             SidecarReport (a sidecar's counters, served at GET /metrics)
//	POST /v1/experiences/import?namespace=&pack=&trust=1
//	                                     experiences, JSON Lines → ImportResult
//	                                     (cleaned, see CleanImport; 400 lists bad lines)
//	GET  /v1/experiences/export?namespace=  experiences, JSON Lines
//	POST /v1/experiences/purge           PurgeExperiencesRequest → PurgeResult (erased for good)
//	POST /v1/reflect                     ReflectRequest → ReflectProgress lines
//	POST /v1/reflect/replay              ReflectReplayRequest → ReflectReplayProgress lines, the last with the plan
const apiVersion = "v1"

// ReflectionQueue takes final tasks for reflection. The reflect package
// implements it; a nil queue means the daemon does not reflect (final tasks
// wait and are handed over once a queue is configured).
type ReflectionQueue interface {
	// Enqueue adds a final task. It must be idempotent: a task may be
	// enqueued again after a late step reopened it.
	Enqueue(ctx context.Context, taskID string) error
	// Stats describes the queue for `hindsight status`.
	Stats(ctx context.Context) (QueueStats, error)
	// RunNow reflects the tasks ids, and every pending task when pending
	// is set, before returning; progress reports each task done.
	RunNow(ctx context.Context, ids []string, pending bool, progress func(done, total int)) error
}

// QueueStats describes the reflection queue.
type QueueStats struct {
	Pending   int        `json:"pending"`
	Retrying  int        `json:"retrying"` // of the pending, those that failed before
	Running   int        `json:"running"`
	Done      int        `json:"done"`
	Failed    int        `json:"failed"`
	LastError string     `json:"last_error,omitempty"`
	LastRunAt *time.Time `json:"last_run_at,omitempty"`

	Dropped map[string]int `json:"dropped,omitempty"` // candidate experiences dropped, by reason
	Merged  map[string]int `json:"merged,omitempty"`  // experiences stored, by outcome

	LLMCallsLastHour  int `json:"llm_calls_last_hour"`
	LLMTokensLastHour int `json:"llm_tokens_last_hour"`
}

// Health is the daemon's answer to "are you there?".
type Health struct {
	OK        bool      `json:"ok"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	Home      string    `json:"home"`
}

// Status is what `hindsight status` shows.
type Status struct {
	Daemon      *Health       `json:"daemon"` // nil when the daemon does not answer
	Running     bool          `json:"running"`
	Traces      *traces.Stats `json:"traces,omitempty"`
	Reflection  *QueueStats   `json:"reflection"` // nil: reflection not configured
	Experiences *StoreStats   `json:"experiences,omitempty"`
	// StoreOps is the queue of experience-store writes waiting for the
	// store; nil when the daemon keeps none.
	StoreOps *StoreOpsStats   `json:"store_ops,omitempty"`
	Disk     map[string]int64 `json:"disk,omitempty"` // bytes per directory under the daemon's data
	Outboxes []spool.Info     `json:"outboxes"`
	// Losses are the steps sidecars lost or stored cut, per server, from
	// their durable ledgers (see internal/losses): read by the CLI from
	// the home directory, so they show whether the daemon runs or not.
	Losses []losses.ServerLosses `json:"losses"`
	// DiskLow is set while the daemon refuses steps for lack of disk
	// space; DiskRefused counts the batches it refused so.
	DiskLow     bool  `json:"disk_low,omitempty"`
	DiskRefused int64 `json:"disk_refused,omitempty"`
	// Tools are the tools the sidecars pinned (see package toolpin): read
	// from the home directory, like Losses.
	Tools *toolpin.Summary `json:"tools,omitempty"`
	// Hint says how to recover when the daemon is not running.
	Hint string `json:"hint,omitempty"`
	// StartError says why the last daemon that tried to start failed,
	// when the daemon is not running and one did.
	StartError *StartError `json:"start_error,omitempty"`
}

// StartError is why a daemon failed to start, and when.
type StartError struct {
	At    time.Time `json:"at"`
	Error string    `json:"error"`
}

// StepBatch is the body of POST /v1/steps.
type StepBatch struct {
	Steps []hindsight.Step `json:"steps"`
}

// SessionClose is the body of POST /v1/sessions/close. Source and LastSeq,
// when given, make the close wait for the session's last step.
type SessionClose struct {
	SessionID string  `json:"session_id"`
	Source    string  `json:"source,omitempty"`
	LastSeq   *uint64 `json:"last_seq,omitempty"`
}

// SessionCloseResult lists the tasks the close made final.
type SessionCloseResult struct {
	Final []string `json:"final"`
}

// ReflectRequest is the body of POST /v1/reflect.
type ReflectRequest struct {
	TaskIDs []string `json:"task_ids,omitempty"`
	Pending bool     `json:"pending,omitempty"`
}

// ReflectProgress is one line of the answer to POST /v1/reflect: progress
// lines, then one with Finished set.
type ReflectProgress struct {
	Done     int    `json:"done"`
	Total    int    `json:"total"`
	Finished bool   `json:"finished,omitempty"`
	Error    string `json:"error,omitempty"`
}

// APIError is an error answered by the daemon.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("daemon: %s (status %d)", e.Message, e.Status) }

// Unwrap maps statuses to the hindsight errors they stand for.
func (e *APIError) Unwrap() error {
	switch e.Status {
	case 400, 413:
		return ErrRejected
	case 404:
		return hindsight.ErrNotFound
	case 409:
		return hindsight.ErrConflict
	case 503:
		return ErrUnavailable
	case 507:
		return ErrDiskFull
	}
	return nil
}

// Is reports an answer saying that the experience store is unreachable
// (503 with hindsight.ErrStoreUnavailable's words) as that error.
func (e *APIError) Is(target error) bool {
	return target == hindsight.ErrStoreUnavailable && e.Status == 503 &&
		strings.Contains(e.Message, hindsight.ErrStoreUnavailable.Error())
}

// ErrUnavailable reports a part of the daemon that is not configured: the
// memory service's.
var ErrUnavailable = memory.ErrUnavailable

// ErrRejected marks a batch the daemon refused as bad input (status 400):
// delivering it again will not help. It is the trace store's own.
var ErrRejected = traces.ErrRejected

// IngestResult says what became of a step batch (the answer to POST
// /v1/steps): the trace store's.
type IngestResult = traces.IngestResult

// TaskFilter selects the tasks GET /v1/tasks lists: the trace store's.
type TaskFilter = traces.TaskFilter
