// Package memserver is Hindsight's memory as an MCP server (`hindsight
// mcp`): tools with which any agent that has an MCP client records the
// steps no sidecar sees, ends its tasks, reads its trajectories and asks
// for lessons, all through the daemon.
//
// The tools, each with an input and an output schema (results carry
// structuredContent and the same as text):
//
//   - store_episode records a step outside MCP (a built-in tool, code
//     execution, a browser, a function call) into a task. The daemon
//     validates and redacts it and stores it as a tools/call step (see
//     daemon.Episode), which reflection reads as untrusted data exactly
//     like an MCP tool's result.
//   - query_episodes returns a task's steps, redacted, a page at a time.
//   - trigger_hindsight makes a task final now and reflects it: it
//     answers once the reflection is queued, or with `wait` after it, with
//     the lessons drawn.
//   - query_hindsight answers as a sidecar's query_hindsight does (at most
//     3 experiences of at most 200 tokens, or the explicit empty answer);
//     query_semantic is the same tool under the design's name.
//   - list_tasks lists tasks by status, newest first.
//
// Writes (store_episode, trigger_hindsight) are rate limited per MCP
// session.
package memserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/time/rate"
)

// Daemon is what the server needs of the daemon; *daemon.Client
// implements it.
type Daemon interface {
	StoreEpisode(ctx context.Context, e daemon.Episode) (*daemon.EpisodeResult, error)
	FinalTask(ctx context.Context, req daemon.FinalRequest) (*daemon.FinalResult, error)
	Tasks(ctx context.Context, f daemon.TaskFilter) ([]hindsight.Task, error)
	Task(ctx context.Context, id string) (*hindsight.Task, error)
	Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error)
}

// Defaults of Options.
const (
	DefaultWritesPerMinute = 120 // store_episode and trigger_hindsight calls per session
	DefaultWriteBurst      = 30
	DefaultPageSize        = 50 // query_episodes
	MaxPageSize            = 200
	DefaultListLimit       = 20 // list_tasks
	MaxListLimit           = 500
	// MaxObservationBytes caps a step's observation in query_episodes.
	MaxObservationBytes = 4 << 10
)

// Options configure the server.
type Options struct {
	Daemon    Daemon // required
	Namespace string // experiences' namespace; "": hindsight.DefaultNamespace
	Version   string
	// WritesPerMinute and WriteBurst rate-limit writes per MCP session;
	// 0: the defaults; WritesPerMinute < 0: no limit.
	WritesPerMinute int
	WriteBurst      int
	Logger          *slog.Logger // nil: slog.Default()
}

// Tool names.
const (
	ToolStoreEpisode     = "store_episode"
	ToolQueryEpisodes    = "query_episodes"
	ToolTriggerHindsight = "trigger_hindsight"
	ToolQueryHindsight   = inject.QueryToolName
	ToolQuerySemantic    = "query_semantic"
	ToolListTasks        = "list_tasks"
)

// Instructions is what the server tells clients about itself.
const Instructions = "Hindsight's memory of this machine's agent runs. Record steps taken outside MCP tools " +
	"(built-in tools, code execution, a browser) with store_episode under your task's id; when the task is finished, " +
	"call trigger_hindsight so its lessons are learned at once; before a step you are unsure of and after an error, " +
	"call query_hindsight with the situation."

// Server is the memory's MCP server.
type Server struct {
	opt Options
	inj *inject.Injector
	mcp *server.MCPServer

	mu       sync.Mutex
	limiters map[string]*rate.Limiter // by MCP session
	episodes episodeTasks             // tasks to end at Close
}

// maxLimiters bounds the per-session limiters kept.
const maxLimiters = 4096

// New builds the server with its tools.
func New(opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.WritesPerMinute == 0 {
		opt.WritesPerMinute = DefaultWritesPerMinute
	}
	if opt.WriteBurst <= 0 {
		opt.WriteBurst = DefaultWriteBurst
	}
	s := &Server{opt: opt, limiters: map[string]*rate.Limiter{}}
	s.inj = &inject.Injector{Source: opt.Daemon, Namespace: opt.Namespace, Logger: opt.Logger}
	s.mcp = server.NewMCPServer("hindsight-memory", opt.Version,
		server.WithToolCapabilities(false),
		server.WithInstructions(Instructions),
		server.WithRecovery(),
	)
	for _, t := range s.tools() {
		s.mcp.AddTool(t.tool, t.handler)
	}
	return s
}

// MCP returns the underlying mcp-go server, to serve on a transport.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

type toolDef struct {
	tool    mcp.Tool
	handler server.ToolHandlerFunc
}

func (s *Server) tools() []toolDef {
	queryDesc := "Hindsight's memory of past runs: lessons learned from earlier failures and recoveries. " +
		"Call it before a step you are unsure of, and after an error, describing the situation; " +
		"it answers with at most 3 past experiences, most relevant first, or says there is none."
	return []toolDef{
		{mcp.NewTool(ToolStoreEpisode,
			mcp.WithDescription("Record a step of your task that no MCP tool call recorded (a built-in tool, code execution, a browser, a function call), "+
				"so that reflection learns from it. Secrets are redacted before it is stored. Give step_index to make a retry harmless "+
				"(the same task and index is stored once); without it the episode takes the task's next index."),
			mcp.WithToolTitle("Store episode"),
			withInput(storeEpisodeIn), mcp.WithRawOutputSchema(storeEpisodeOut),
			hints(false, false, false)), s.storeEpisode},
		{mcp.NewTool(ToolQueryEpisodes,
			mcp.WithDescription("A task's recorded steps (MCP calls and episodes), redacted, in step order, a page at a time."),
			mcp.WithToolTitle("Query episodes"),
			withInput(queryEpisodesIn), mcp.WithRawOutputSchema(queryEpisodesOut),
			hints(true, false, true)), s.queryEpisodes},
		{mcp.NewTool(ToolTriggerHindsight,
			mcp.WithDescription("Say that a task is finished: it is final at once and its reflection starts, without waiting for the idle gap. "+
				"With wait, the answer comes after the reflection, with the lessons it drew."),
			mcp.WithToolTitle("Trigger hindsight"),
			withInput(triggerIn), mcp.WithRawOutputSchema(triggerOut),
			hints(false, false, true)), s.trigger},
		{mcp.NewTool(ToolQueryHindsight, mcp.WithDescription(queryDesc), mcp.WithToolTitle("Query Hindsight"),
			withInput(queryIn), mcp.WithRawOutputSchema(queryOut),
			hints(true, false, true)), s.query},
		{mcp.NewTool(ToolQuerySemantic, mcp.WithDescription(queryDesc+" (The same tool as "+ToolQueryHindsight+"; query_text and top_k are accepted.)"),
			mcp.WithToolTitle("Query semantic memory"),
			withInput(queryIn), mcp.WithRawOutputSchema(queryOut),
			hints(true, false, true)), s.query},
		{mcp.NewTool(ToolListTasks,
			mcp.WithDescription("Recorded tasks, newest first: open (still running), final (ended), reflected (lessons drawn) or failed (reflection failed)."),
			mcp.WithToolTitle("List tasks"),
			withInput(listTasksIn), mcp.WithRawOutputSchema(listTasksOut),
			hints(true, false, true)), s.listTasks},
	}
}

// allowWrite takes a write from the session's budget.
func (s *Server) allowWrite(ctx context.Context) bool {
	if s.opt.WritesPerMinute < 0 {
		return true
	}
	id := ""
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		id = cs.SessionID()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limiters[id]
	if l == nil {
		if len(s.limiters) >= maxLimiters {
			clear(s.limiters)
		}
		l = rate.NewLimiter(rate.Limit(float64(s.opt.WritesPerMinute)/60), s.opt.WriteBurst)
		s.limiters[id] = l
	}
	return l.Allow()
}

// errRateLimited is the answer to a write over the session's budget.
func (s *Server) errRateLimited(tool string) *mcp.CallToolResult {
	return mcp.NewToolResultError(fmt.Sprintf("%s: rate limited (%d writes a minute per session); try again later", tool, s.opt.WritesPerMinute))
}

// result answers out as structuredContent and as JSON text.
func result(out any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return mcp.NewToolResultStructured(out, string(b)), nil
}

// toolError answers a failure as an isError result the model can read.
func toolError(tool string, err error) *mcp.CallToolResult {
	var ae *daemon.APIError
	switch {
	case errors.As(err, &ae):
		return mcp.NewToolResultError(fmt.Sprintf("%s: %s", tool, ae.Message))
	case errors.Is(err, errBadArgs):
		return mcp.NewToolResultError(fmt.Sprintf("%s: %v", tool, err))
	}
	return mcp.NewToolResultError(fmt.Sprintf("%s: Hindsight's daemon did not answer: %v", tool, err))
}

var errBadArgs = errors.New("bad arguments")

func bind(req mcp.CallToolRequest, v any) error {
	if err := req.BindArguments(v); err != nil {
		return fmt.Errorf("%w: %v", errBadArgs, err)
	}
	return nil
}

// --- store_episode ---

type storeEpisodeArgs struct {
	TaskID      string          `json:"task_id"`
	StepIndex   *int            `json:"step_index"`
	Action      string          `json:"action"`
	Input       json.RawMessage `json:"input"`
	Observation string          `json:"observation"`
	Failed      bool            `json:"failed"`
	Timestamp   string          `json:"timestamp"`
	Agent       string          `json:"agent"`
}

// StoreEpisodeResult is store_episode's structured answer.
type StoreEpisodeResult struct {
	TaskID     string `json:"task_id"`
	StepIndex  int    `json:"step_index"`
	Duplicate  bool   `json:"duplicate"`
	Redactions int    `json:"redactions"`
}

func (s *Server) storeEpisode(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a storeEpisodeArgs
	if err := bind(req, &a); err != nil {
		return toolError(ToolStoreEpisode, err), nil
	}
	e := daemon.Episode{TaskID: a.TaskID, StepIndex: a.StepIndex, Action: a.Action, Input: a.Input,
		Observation: a.Observation, Failed: a.Failed, Agent: a.Agent}
	if a.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, a.Timestamp)
		if err != nil {
			return toolError(ToolStoreEpisode, fmt.Errorf("%w: timestamp: want RFC 3339, like 2026-12-01T10:00:00Z", errBadArgs)), nil
		}
		e.Timestamp = t
	}
	if !s.allowWrite(ctx) {
		return s.errRateLimited(ToolStoreEpisode), nil
	}
	res, err := s.opt.Daemon.StoreEpisode(ctx, e)
	if err != nil {
		return toolError(ToolStoreEpisode, err), nil
	}
	s.episodes.add(res.TaskID)
	return result(StoreEpisodeResult{TaskID: res.TaskID, StepIndex: res.StepIndex, Duplicate: res.Duplicate, Redactions: res.Redactions})
}

// --- query_episodes ---

type queryEpisodesArgs struct {
	TaskID string `json:"task_id"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

// StepView is one step as query_episodes shows it.
type StepView struct {
	StepIndex   int             `json:"step_index"`
	Kind        string          `json:"kind"` // "episode" or "mcp"
	Server      string          `json:"server"`
	Method      string          `json:"method"`
	Tool        string          `json:"tool,omitempty"`
	StartedAt   time.Time       `json:"started_at"`
	Input       json.RawMessage `json:"input,omitempty"`
	Observation string          `json:"observation,omitempty"`
	IsError     bool            `json:"is_error"`
	CausalTag   string          `json:"causal_tag"`
	Redactions  int             `json:"redactions"`
}

// QueryEpisodesResult is query_episodes' structured answer.
type QueryEpisodesResult struct {
	TaskID     string     `json:"task_id"`
	Status     string     `json:"status"`
	Total      int        `json:"total"`
	Offset     int        `json:"offset"`
	NextOffset *int       `json:"next_offset,omitempty"` // absent on the last page
	Steps      []StepView `json:"steps"`
}

func (s *Server) queryEpisodes(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a queryEpisodesArgs
	if err := bind(req, &a); err != nil {
		return toolError(ToolQueryEpisodes, err), nil
	}
	if a.TaskID == "" || a.Offset < 0 || a.Limit < 0 || a.Limit > MaxPageSize {
		return toolError(ToolQueryEpisodes, fmt.Errorf("%w: want a task_id, offset ≥ 0, 0 ≤ limit ≤ %d", errBadArgs, MaxPageSize)), nil
	}
	if a.Limit == 0 {
		a.Limit = DefaultPageSize
	}
	task, err := s.opt.Daemon.Task(ctx, a.TaskID)
	if err != nil {
		return toolError(ToolQueryEpisodes, err), nil
	}
	out := QueryEpisodesResult{TaskID: task.ID, Status: status(task), Total: len(task.Steps), Offset: a.Offset, Steps: []StepView{}}
	for i := a.Offset; i < len(task.Steps) && len(out.Steps) < a.Limit; i++ {
		out.Steps = append(out.Steps, view(&task.Steps[i]))
	}
	if next := a.Offset + len(out.Steps); next < len(task.Steps) {
		out.NextOffset = &next
	}
	return result(out)
}

// view shows a stored (redacted) step.
func view(st *hindsight.Step) StepView {
	v := StepView{StepIndex: st.StepIndex, Kind: "mcp", Server: st.Server, Method: st.Method, Tool: st.Tool,
		StartedAt: st.StartedAt, IsError: st.Failed(), CausalTag: string(st.CausalTag), Redactions: st.Redactions}
	if st.Transport == daemon.EpisodeTransport {
		v.Kind = "episode"
	}
	if len(st.Arguments) > 0 && json.Valid(st.Arguments) {
		v.Input = st.Arguments
	}
	v.Observation = observation(st)
	return v
}

// observation is a step's outcome as text: its result's text items, or
// its error's message, at most MaxObservationBytes.
func observation(st *hindsight.Step) string {
	var text string
	if st.Error != nil {
		text = st.Error.Message
	} else if len(st.Result) > 0 {
		var r struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(st.Result, &r) == nil && len(r.Content) > 0 {
			var parts []string
			for _, c := range r.Content {
				if c.Type == "text" {
					parts = append(parts, c.Text)
				}
			}
			text = strings.Join(parts, "\n")
		} else {
			text = string(st.Result)
		}
	}
	if len(text) > MaxObservationBytes {
		text = strings.ToValidUTF8(text[:MaxObservationBytes], "") + "…"
	}
	return text
}

// --- trigger_hindsight ---

type triggerArgs struct {
	TaskID string `json:"task_id"`
	Wait   bool   `json:"wait"`
}

// Lesson is one lesson trigger_hindsight reports.
type Lesson struct {
	ID          string  `json:"id"`
	Server      string  `json:"server"`
	Tool        string  `json:"tool"`
	Lesson      string  `json:"lesson"`
	Confidence  float64 `json:"confidence"`
	SourceSteps []int   `json:"source_steps"`
}

// TriggerResult is trigger_hindsight's structured answer.
type TriggerResult struct {
	TaskID     string   `json:"task_id"`
	WasFinal   bool     `json:"was_final"`
	Queued     bool     `json:"queued"`
	Reflection string   `json:"reflection"`
	Waited     bool     `json:"waited"`
	Lessons    []Lesson `json:"lessons"`
	Error      string   `json:"error,omitempty"`
}

func (s *Server) trigger(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a triggerArgs
	if err := bind(req, &a); err != nil {
		return toolError(ToolTriggerHindsight, err), nil
	}
	if a.TaskID == "" {
		return toolError(ToolTriggerHindsight, fmt.Errorf("%w: want a task_id", errBadArgs)), nil
	}
	if !s.allowWrite(ctx) {
		return s.errRateLimited(ToolTriggerHindsight), nil
	}
	res, err := s.opt.Daemon.FinalTask(ctx, daemon.FinalRequest{TaskID: a.TaskID, Wait: a.Wait})
	if err != nil {
		return toolError(ToolTriggerHindsight, err), nil
	}
	s.episodes.remove(res.TaskID)
	out := TriggerResult{TaskID: res.TaskID, WasFinal: res.WasFinal, Queued: res.Queued, Reflection: res.Reflection,
		Waited: res.Waited, Lessons: []Lesson{}, Error: res.Error}
	for _, e := range res.Experiences {
		steps := e.SourceSteps
		if steps == nil {
			steps = []int{}
		}
		out.Lessons = append(out.Lessons, Lesson{ID: e.ID, Server: e.Server, Tool: e.Tool, Lesson: e.Lesson, Confidence: e.Confidence, SourceSteps: steps})
	}
	return result(out)
}

// --- query_hindsight, query_semantic ---

type queryArgs struct {
	Situation string `json:"situation"`
	QueryText string `json:"query_text"`
	ToolName  string `json:"tool_name"`
	TaskType  string `json:"task_type"`
	Server    string `json:"server"`
	TopK      int    `json:"top_k"`
}

// Experience is one experience a query shows.
type Experience struct {
	ID            string  `json:"id"`
	Server        string  `json:"server"`
	Tool          string  `json:"tool"`
	Lesson        string  `json:"lesson"`
	Confidence    float64 `json:"confidence"`
	EvidenceCount int     `json:"evidence_count"`
}

// QueryResult is query_hindsight's structured answer: Text is the
// sidecar's answer, word for word.
type QueryResult struct {
	Text        string       `json:"text"`
	Experiences []Experience `json:"experiences"`
}

func (s *Server) query(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a queryArgs
	if err := bind(req, &a); err != nil {
		return toolError(req.Params.Name, err), nil
	}
	if a.Situation == "" {
		a.Situation = a.QueryText
	}
	if a.TopK < 0 {
		return toolError(req.Params.Name, fmt.Errorf("%w: top_k must be 1 to %d", errBadArgs, inject.DefaultMaxExperiences)), nil
	}
	inj := s.inj
	if a.TopK > 0 && a.TopK < inject.DefaultMaxExperiences {
		c := &inject.Injector{Source: s.opt.Daemon, Namespace: s.opt.Namespace, Logger: s.opt.Logger, MaxExperiences: a.TopK}
		inj = c
	}
	text, shown, err := inj.Query(ctx, a.Server, a.Situation, a.ToolName, a.TaskType)
	if err != nil {
		s.opt.Logger.Warn("query: search failed", "err", err)
	}
	out := QueryResult{Text: text, Experiences: []Experience{}}
	for _, e := range shown {
		out.Experiences = append(out.Experiences, Experience{ID: e.ID, Server: e.Server, Tool: e.Tool, Lesson: e.Lesson,
			Confidence: e.Confidence, EvidenceCount: max(e.EvidenceCount, 1)})
	}
	return mcp.NewToolResultStructured(out, text), nil
}

// --- list_tasks ---

type listTasksArgs struct {
	Status string `json:"status"`
	Limit  int    `json:"limit"`
}

// TaskView is one task as list_tasks shows it.
type TaskView struct {
	ID           string    `json:"id"`
	Status       string    `json:"status"`
	StartedAt    time.Time `json:"started_at"`
	EndedAt      time.Time `json:"ended_at"`
	Servers      []string  `json:"servers"`
	StepCount    int       `json:"step_count"`
	FailureCount int       `json:"failure_count"`
}

// ListTasksResult is list_tasks' structured answer.
type ListTasksResult struct {
	Tasks []TaskView `json:"tasks"`
}

// Task statuses.
const (
	StatusOpen      = "open"
	StatusFinal     = "final"
	StatusReflected = "reflected"
	StatusFailed    = "failed"
)

// status is a task's status: open, final (not reflected yet), reflected
// or failed.
func status(t *hindsight.Task) string {
	switch {
	case !t.Final:
		return StatusOpen
	case t.Reflection == "done":
		return StatusReflected
	case t.Reflection == "failed":
		return StatusFailed
	}
	return StatusFinal
}

func (s *Server) listTasks(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a listTasksArgs
	if err := bind(req, &a); err != nil {
		return toolError(ToolListTasks, err), nil
	}
	switch a.Status {
	case "", "any", StatusOpen, StatusFinal, StatusReflected, StatusFailed:
	default:
		return toolError(ToolListTasks, fmt.Errorf("%w: status: want open, final, reflected, failed or any", errBadArgs)), nil
	}
	if a.Limit < 0 || a.Limit > MaxListLimit {
		return toolError(ToolListTasks, fmt.Errorf("%w: limit: want 1 to %d", errBadArgs, MaxListLimit)), nil
	}
	if a.Limit == 0 {
		a.Limit = DefaultListLimit
	}
	var f daemon.TaskFilter
	switch a.Status {
	case StatusOpen:
		f.Final = new(false)
	case StatusFinal, StatusReflected, StatusFailed:
		f.Final = new(true)
	}
	if a.Status == "" || a.Status == "any" || a.Status == StatusOpen {
		f.Limit = a.Limit
	}
	tasks, err := s.opt.Daemon.Tasks(ctx, f)
	if err != nil {
		return toolError(ToolListTasks, err), nil
	}
	out := ListTasksResult{Tasks: []TaskView{}}
	for i := range tasks {
		t := &tasks[i]
		st := status(t)
		if a.Status != "" && a.Status != "any" && st != a.Status {
			continue
		}
		servers := t.Servers
		if servers == nil {
			servers = []string{}
		}
		out.Tasks = append(out.Tasks, TaskView{ID: t.ID, Status: st, StartedAt: t.StartedAt, EndedAt: t.EndedAt,
			Servers: servers, StepCount: t.StepCount, FailureCount: t.FailureCount})
		if len(out.Tasks) == a.Limit {
			break
		}
	}
	return result(out)
}
