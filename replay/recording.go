// Package replay answers and checks MCP traffic from recorded steps: a
// stand-in server that answers as a recorded server did (Server), and a
// check of a live server against what it answered before (Verify).
//
// A Recording is built from the steps of one server in a task, as `hindsight
// traces export` writes them or the daemon returns them. What Hindsight
// added to the traffic is removed so the stand-in is the server as it was:
// the query_hindsight tool in tools/list, the "[Hindsight]" text items
// appended to error results, the lines appended to the instructions; steps
// the sidecar answered itself (Local) and server-to-client requests are
// skipped.
package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Match says how a tools/call is matched to the recorded calls.
type Match string

// The matching modes.
const (
	// MatchExact answers a call with a recorded call of the same tool and
	// the same arguments (_meta ignored; a recorded redacted value matches
	// any value). Repeated calls get the recorded answers in order, the
	// last one again once they are used up.
	MatchExact Match = "exact"
	// MatchTool answers a call with the next recorded call of the same
	// tool, whatever its arguments.
	MatchTool Match = "tool"
	// MatchSequential answers the n-th call with the n-th recorded call,
	// when it is of the same tool.
	MatchSequential Match = "sequential"
)

// ParseMatch checks a matching mode's name ("" is MatchExact).
func ParseMatch(s string) (Match, error) {
	switch Match(s) {
	case "", MatchExact:
		return MatchExact, nil
	case MatchTool, MatchSequential:
		return Match(s), nil
	}
	return "", fmt.Errorf("parse match mode: %q is not exact, tool or sequential", s)
}

// Call is a recorded tools/call.
type Call struct {
	Step      int             // the step's index in its task
	Tool      string          // the tool's name
	Arguments json.RawMessage // as recorded (redacted)
	Result    json.RawMessage // the result, Hindsight's additions removed; nil with Error
	Error     *hindsight.RPCError
	IsError   bool
	// Truncated is set when the recorded answer was shortened before it
	// was stored: it cannot be replayed.
	Truncated bool
	// Redacted is set when the recorded arguments hold redacted values:
	// the call cannot be sent again as it was.
	Redacted bool
}

// Answer is a recorded answer to a request other than tools/call.
type Answer struct {
	Step      int
	Method    string
	Params    json.RawMessage
	Result    json.RawMessage
	Error     *hindsight.RPCError
	Truncated bool
}

// Recording is what a server answered in one task, ready to be replayed.
type Recording struct {
	Server string
	// Initialize and Discover are the results of initialize and
	// server/discover, instructions without Hindsight's lines; nil when
	// not recorded.
	Initialize, Discover json.RawMessage
	// Calls are the tools/call steps in recorded order.
	Calls []*Call
	// Answers are the other requests' answers in recorded order:
	// tools/list, resources/list, resources/read, prompts/get… .
	Answers []*Answer
	// Skipped counts steps left out: local, server to client, notifications.
	Skipped int
}

// ReadSteps reads steps from r: JSON Lines of hindsight.Step (`traces
// export`), or one task as JSON with a "steps" array (`traces show
// --json`).
func ReadSteps(r io.Reader) ([]hindsight.Step, error) {
	br := bufio.NewReader(r)
	b, err := io.ReadAll(br)
	if err != nil {
		return nil, fmt.Errorf("read steps: %w", err)
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, nil
	}
	if gjson.GetBytes(trimmed, "steps").IsArray() && !bytes.Contains(trimmed, []byte("\n{")) {
		var task hindsight.Task
		if err := json.Unmarshal(trimmed, &task); err != nil {
			return nil, fmt.Errorf("read steps: %w", err)
		}
		return task.Steps, nil
	}
	var steps []hindsight.Step
	for i, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var s hindsight.Step
		if err := json.Unmarshal(line, &s); err != nil {
			return nil, fmt.Errorf("read steps: line %d: %w", i+1, err)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// Servers returns the servers of steps, sorted.
func Servers(steps []hindsight.Step) []string {
	var out []string
	for i := range steps {
		if s := steps[i].Server; !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// ErrNoSteps is returned by New for a task without steps of the server.
var ErrNoSteps = errors.New("no recorded steps")

// New builds the recording of server from steps (all of them when server
// is "" and the steps are of one server; an error names the servers
// otherwise).
func New(steps []hindsight.Step, server string) (*Recording, error) {
	if server == "" {
		switch servers := Servers(steps); len(servers) {
		case 0:
			return nil, fmt.Errorf("build recording: %w", ErrNoSteps)
		case 1:
			server = servers[0]
		default:
			return nil, fmt.Errorf("build recording: the steps are of several servers (%s): name one", strings.Join(servers, ", "))
		}
	}
	rec := &Recording{Server: server}
	for i := range steps {
		s := &steps[i]
		if s.Server != server {
			continue
		}
		if s.Local || s.Direction == hindsight.ServerToClient || s.Method == "" || strings.HasPrefix(s.Method, "notifications/") {
			rec.Skipped++
			continue
		}
		truncated := truncatedAnswer(s)
		switch s.Method {
		case "initialize":
			if !truncated && s.Result != nil {
				rec.Initialize = stripInstructions(s.Result)
			}
		case "server/discover":
			if !truncated && s.Result != nil {
				rec.Discover = stripInstructions(s.Result)
			}
		case "tools/call":
			c := &Call{Step: s.StepIndex, Tool: s.Tool, Arguments: s.Arguments, Error: s.Error, IsError: s.IsError, Truncated: truncated}
			c.Redacted = hasRedacted(gjson.ParseBytes(s.Arguments))
			if s.Result != nil && !truncated {
				c.Result = stripResult(s)
			}
			rec.Calls = append(rec.Calls, c)
		default:
			a := &Answer{Step: s.StepIndex, Method: s.Method, Params: s.Arguments, Error: s.Error, Truncated: truncated}
			if s.Result != nil && !truncated {
				a.Result = s.Result
				if s.Method == "tools/list" {
					a.Result = stripToolsList(s.Result)
				}
			}
			rec.Answers = append(rec.Answers, a)
		}
	}
	if rec.Initialize == nil && rec.Discover == nil && len(rec.Calls) == 0 && len(rec.Answers) == 0 {
		return nil, fmt.Errorf("build recording of %q: %w", server, ErrNoSteps)
	}
	return rec, nil
}

// truncatedAnswer reports whether the step's answer was shortened.
func truncatedAnswer(s *hindsight.Step) bool {
	for _, t := range s.Truncated {
		if t.Field == "result" || t.Field == "response" {
			return true
		}
	}
	return false
}

// RedactedPrefix starts every value the sidecar's redaction replaced.
const RedactedPrefix = "[REDACTED"

func isRedacted(v gjson.Result) bool {
	return v.Type == gjson.String && strings.HasPrefix(v.Str, RedactedPrefix)
}

func hasRedacted(v gjson.Result) bool {
	if isRedacted(v) {
		return true
	}
	found := false
	if v.IsObject() || v.IsArray() {
		v.ForEach(func(_, x gjson.Result) bool {
			found = hasRedacted(x)
			return !found
		})
	}
	return found
}

// stripInstructions removes what Hindsight appended to the instructions
// of an initialize or server/discover result: from its marker on, with
// the blank line before it; the member goes when nothing is left.
func stripInstructions(result json.RawMessage) json.RawMessage {
	instr := gjson.GetBytes(result, "instructions")
	if instr.Type != gjson.String {
		return result
	}
	i := strings.Index(instr.Str, inject.Marker)
	if i < 0 {
		return result
	}
	kept := strings.TrimSuffix(instr.Str[:i], "\n\n")
	var out []byte
	var err error
	if kept == "" {
		out, err = sjson.DeleteBytes(result, "instructions")
	} else {
		out, err = sjson.SetBytes(result, "instructions", kept)
	}
	if err != nil {
		return result
	}
	return out
}

// queryToolName matches the names Hindsight gives its query tool.
var queryToolName = regexp.MustCompile(`^` + inject.QueryToolName + `(_[0-9]+)?$`)

// stripToolsList removes Hindsight's tools (query_hindsight and
// trigger_hindsight) from a tools/list result.
func stripToolsList(result json.RawMessage) json.RawMessage {
	tools := gjson.GetBytes(result, "tools")
	if !tools.IsArray() {
		return result
	}
	out := result
	arr := tools.Array()
	for i := len(arr) - 1; i >= 0; i-- {
		t := arr[i]
		name, title := t.Get("name").String(), t.Get("title").String()
		ours := (queryToolName.MatchString(name) && title == "Query Hindsight") ||
			(name == inject.EndToolName && title == "Trigger Hindsight")
		if ours {
			if b, err := sjson.DeleteBytes(out, fmt.Sprintf("tools.%d", i)); err == nil {
				out = b
			}
		}
	}
	return out
}

// stripResult removes the "[Hindsight]" text items Hindsight appended to
// an error result.
func stripResult(s *hindsight.Step) json.RawMessage {
	out := s.Result
	content := gjson.GetBytes(out, "content")
	if !content.IsArray() || !gjson.GetBytes(out, "isError").Bool() {
		return out
	}
	arr := content.Array()
	for i := len(arr) - 1; i >= 0; i-- {
		c := arr[i]
		if c.Get("type").String() == "text" && strings.HasPrefix(c.Get("text").String(), inject.Marker+" ") {
			if b, err := sjson.DeleteBytes(out, fmt.Sprintf("content.%d", i)); err == nil {
				out = b
			}
		}
	}
	return out
}
