package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/traces"
)

// Episode is the body of POST /v1/episodes: one step of an agent that no
// sidecar saw (a built-in tool, code execution, a browser, a function
// call), told by the agent itself through `hindsight mcp`'s store_episode.
//
// It is stored as a tools/call step, so reflection reads it like an MCP
// call: Tool is the action, Arguments the input, Result a CallToolResult
// whose one text item is the observation, with isError when the episode
// failed. The step's Source is "episode:TASK" and its Seq the episode's
// index + 1, so the same episode told twice is stored once; its
// ExplicitTask is the task; Transport is EpisodeTransport.
type Episode struct {
	TaskID string `json:"task_id"`
	// StepIndex is the episode's index among the task's episodes
	// (0-based); nil: the next one. It is the episode's identity, not its
	// place among the task's steps, which the daemon assigns on arrival.
	StepIndex   *int            `json:"step_index,omitempty"`
	Action      string          `json:"action"`
	Input       json.RawMessage `json:"input,omitempty"` // a JSON object, or absent
	Observation string          `json:"observation"`
	Failed      bool            `json:"failed,omitempty"`
	Timestamp   time.Time       `json:"timestamp,omitzero"` // when it happened; zero: now
	Agent       string          `json:"agent,omitempty"`    // the step's Server; "": EpisodeServer
}

// EpisodeResult says what became of an episode.
type EpisodeResult struct {
	TaskID     string `json:"task_id"`
	StepIndex  int    `json:"step_index"` // the episode's index among the task's episodes
	Duplicate  bool   `json:"duplicate"`  // told before: nothing changed
	Redactions int    `json:"redactions"` // secrets removed before it was stored
}

// Limits and names of episodes.
const (
	EpisodeTransport    = "mcp-episode" // Transport of an episode's step
	EpisodeServer       = "agent"       // Server of an episode's step when it names no agent
	EpisodeSourcePrefix = "episode:"    // its Source is this and the task id
	MaxEpisodeTaskID    = 200           // bytes of an episode's task id
	MaxEpisodeAction    = 128           // bytes of an action's name
	MaxEpisodeBytes     = 64 << 10      // bytes of an input, and of an observation
	MaxEpisodeIndex     = 1<<31 - 2
)

// EpisodeSource is the Source of the steps of task id's episodes.
func EpisodeSource(taskID string) string { return EpisodeSourcePrefix + taskID }

// validate checks an episode before it is redacted and stored.
func (e *Episode) validate() error {
	switch {
	case e.TaskID == "" || len(e.TaskID) > MaxEpisodeTaskID || !traces.ValidID(e.TaskID):
		return badRequest("task_id: want 1 to %d bytes without '/' or NUL", MaxEpisodeTaskID)
	case e.Action == "" || len(e.Action) > MaxEpisodeAction || !utf8.ValidString(e.Action) || strings.IndexFunc(e.Action, unicode.IsControl) >= 0:
		return badRequest("action: want 1 to %d bytes of text on one line", MaxEpisodeAction)
	case len(e.Agent) > MaxEpisodeAction || strings.IndexFunc(e.Agent, unicode.IsControl) >= 0:
		return badRequest("agent: want at most %d bytes of text on one line", MaxEpisodeAction)
	case len(e.Observation) > MaxEpisodeBytes:
		return badRequest("observation: %d bytes, more than %d", len(e.Observation), MaxEpisodeBytes)
	case len(e.Input) > MaxEpisodeBytes:
		return badRequest("input: %d bytes, more than %d", len(e.Input), MaxEpisodeBytes)
	case e.StepIndex != nil && (*e.StepIndex < 0 || *e.StepIndex > MaxEpisodeIndex):
		return badRequest("step_index: want 0 to %d", MaxEpisodeIndex)
	}
	if in := strings.TrimSpace(string(e.Input)); in != "" && in != "null" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(e.Input, &obj); err != nil {
			return badRequest("input: not a JSON object")
		}
	}
	return nil
}

// step builds the episode's step, redacted, at index idx.
func (e *Episode) step(r Redactor, idx int, now time.Time) (hindsight.Step, int) {
	at := e.Timestamp
	if at.IsZero() {
		at = now
	}
	action, n1 := r.RedactString(e.Action)
	obs, n2 := r.RedactString(e.Observation)
	agent, n3 := r.RedactString(e.Agent)
	if agent == "" {
		agent = EpisodeServer
	}
	args := json.RawMessage(`{}`)
	n4 := 0
	if in := strings.TrimSpace(string(e.Input)); in != "" && in != "null" {
		var b []byte
		b, n4 = r.Redact([]byte(in))
		args = json.RawMessage(b)
	}
	result, _ := json.Marshal(struct {
		Content []map[string]string `json:"content"`
		IsError bool                `json:"isError"`
	}{[]map[string]string{{"type": "text", "text": obs}}, e.Failed})
	tag := hindsight.TagSuccess
	if e.Failed {
		tag = hindsight.TagFailure
	}
	return hindsight.Step{
		Server:       agent,
		StartedAt:    at,
		EndedAt:      at,
		Direction:    hindsight.ClientToServer,
		Method:       "tools/call",
		Tool:         action,
		Arguments:    args,
		Result:       result,
		IsError:      e.Failed,
		CausalTag:    tag,
		Redactions:   n1 + n2 + n3 + n4,
		ExplicitTask: e.TaskID,
		Transport:    EpisodeTransport,
		Source:       EpisodeSource(e.TaskID),
		Seq:          uint64(idx) + 1,
	}, n1 + n2 + n3 + n4
}

// storeEpisode validates, redacts and stores an episode.
func (s *Server) storeEpisode(ctx context.Context, e *Episode) (*EpisodeResult, error) {
	red := s.Redactor
	if red == nil {
		return nil, fmt.Errorf("store episode: %w: no redactor", ErrUnavailable)
	}
	if err := e.validate(); err != nil {
		return nil, err
	}
	// The task id becomes keys and log lines: a secret in it goes first.
	e.TaskID, _ = red.RedactString(e.TaskID)
	var idx int
	if e.StepIndex != nil {
		idx = *e.StepIndex
	} else {
		// The next index: read and write under one lock, so two
		// episodes told at once take two.
		s.episodeMu.Lock()
		defer s.episodeMu.Unlock()
		hw, err := s.Traces.HighWater(ctx, EpisodeSource(e.TaskID))
		if err != nil {
			return nil, err
		}
		if hw > MaxEpisodeIndex {
			return nil, badRequest("task %s has too many episodes", e.TaskID)
		}
		idx = int(hw)
	}
	st, n := e.step(red, idx, time.Now())
	res, err := s.Traces.Ingest(ctx, []hindsight.Step{st})
	if err != nil {
		if errors.Is(err, ErrRejected) {
			return nil, badRequest("%v", err)
		}
		return nil, fmt.Errorf("store episode: %w", err)
	}
	s.m.ingested.Add(float64(res.Accepted))
	s.m.duplicates.Add(float64(res.Duplicates))
	return &EpisodeResult{TaskID: e.TaskID, StepIndex: idx, Duplicate: res.Duplicates > 0, Redactions: n}, nil
}

func (s *Server) handleEpisode(w http.ResponseWriter, r *http.Request) {
	var e Episode
	if err := decodeBody(w, r, &e); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.storeEpisode(r.Context(), &e)
	s.answer(w, r, res, err)
}

// StoreEpisode records an agent's step outside MCP (POST /v1/episodes):
// the daemon validates and redacts it, gives it the task's next episode
// index when it has none, and stores it once per task and index.
func (c *Client) StoreEpisode(ctx context.Context, e Episode) (*EpisodeResult, error) {
	var res EpisodeResult
	if err := c.call(ctx, http.MethodPost, "/episodes", nil, e, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
