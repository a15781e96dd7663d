// Package convert turns published agent trajectories (runs of tool-use and
// MCP benchmarks) into `hindsight traces import` files with a frozen
// labels file, so that `hindsight eval` measures learning on errors that
// real servers wrote.
//
// Each source has a reader (LiveMCPBench, ToolBench) that yields tasks of
// calls in the order the agent made them. Build gives the calls the steps
// a capture would have recorded: timestamps (the sources have none, so
// each task starts an hour after the previous one and each call a second
// after the last), one session per task and server, error codes and
// causal tags computed by the capture's own code. Each failed call gets
// an error class from a Classifier: a hand-written table of patterns per
// source, then a reference template that the reflector does not use.
package convert

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
)

// maxResult is the most bytes of a result kept: longer ones are cut, as
// a capture with a body limit would, to keep the converted files small.
const maxResult = 4096

// Source is what the steps' source field says.
const Source = "converted"

// Call is one tool call of a trajectory and what it returned.
type Call struct {
	Server string
	Tool   string
	// Args are the call's arguments, a JSON object.
	Args json.RawMessage
	// Text is the result's text; IsError says the server flagged it.
	Text    string
	IsError bool
	// Result, when set, is the server's own CallToolResult (Text and
	// IsError are then read from it).
	Result json.RawMessage
}

// Task is one trajectory.
type Task struct {
	ID    string
	Calls []Call
}

// Label is the frozen truth about one failed call, the line format of
// labels.jsonl (eval.Load reads task_id, step_index and error_class).
type Label struct {
	TaskID     string `json:"task_id"`
	StepIndex  int    `json:"step_index"`
	Server     string `json:"server"`
	Tool       string `json:"tool"`
	ErrorClass string `json:"error_class"`
}

// Build returns the steps of tasks, tasks starting an hour apart from
// start, and the labels of their failed calls as classify names them.
func Build(tasks []Task, start time.Time, classify func(Call) string) ([]hindsight.Step, []Label) {
	tagger := capture.NewTagger()
	var steps []hindsight.Step
	var labels []Label
	var seq uint64
	for ti, t := range tasks {
		now := start.Add(time.Duration(ti) * time.Hour)
		for i, c := range t.Calls {
			seq++
			s := hindsight.Step{
				TaskID: t.ID, SessionID: fmt.Sprintf("%s/%s", t.ID, c.Server), Server: c.Server, StepIndex: i,
				StartedAt: now, EndedAt: now.Add(100 * time.Millisecond), LatencyMS: 100,
				Direction: hindsight.ClientToServer, Method: "tools/call", Tool: c.Tool,
				Arguments: c.Args, Result: resultOf(c), IsError: c.IsError,
				Transport: "stdio", Source: Source, Seq: seq,
			}
			now = now.Add(time.Second)
			s.ErrorCode = capture.ErrorCode(&s)
			s.CausalTag = hindsight.TagSuccess
			if s.IsError {
				s.CausalTag = hindsight.TagFailure
			}
			tagger.Tag(&s)
			steps = append(steps, s)
			if s.IsError {
				labels = append(labels, Label{t.ID, i, c.Server, c.Tool, classify(c)})
			}
		}
	}
	return steps, labels
}

// resultOf is c's CallToolResult: its own, or one text block.
func resultOf(c Call) json.RawMessage {
	if len(c.Result) > 0 {
		return c.Result
	}
	text := c.Text
	if len(text) > maxResult {
		text = strings.ToValidUTF8(text[:maxResult], "") + " [truncated]"
	}
	b, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": c.IsError})
	return b
}

// toolResult is the part of an MCP CallToolResult a converter reads.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError *bool `json:"isError"`
}

// asToolResult reads text as an MCP CallToolResult: ok when it is one
// (a JSON object with a content list and an isError flag).
func asToolResult(text string) (toolResult, bool) {
	var r toolResult
	if err := json.Unmarshal([]byte(text), &r); err != nil || r.Content == nil || r.IsError == nil {
		return r, false
	}
	return r, true
}

// joined is the text blocks of r, one a line.
func (r toolResult) joined() string {
	out := ""
	for i, c := range r.Content {
		if i > 0 {
			out += "\n"
		}
		out += c.Text
	}
	return out
}
