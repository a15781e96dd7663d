package tasktest

import (
	"encoding/json"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// T0 is the time the steps of Step and GoldenSteps are placed after.
var T0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Step makes a successful tools/call step of read_file on server "fs",
// started at T0+at and lasting 100 ms.
func Step(source string, seq uint64, at time.Duration) hindsight.Step {
	return hindsight.Step{
		Source: source, Seq: seq, Server: "fs", Method: "tools/call", Tool: "read_file",
		StartedAt: T0.Add(at), EndedAt: T0.Add(at + 100*time.Millisecond), LatencyMS: 100,
		CausalTag: hindsight.TagSuccess, Direction: hindsight.ClientToServer,
	}
}

// Stdio returns s as a step of the stdio session session of host pid.
func Stdio(s hindsight.Step, session string, pid int) hindsight.Step {
	s.SessionID, s.HostPID, s.Transport = session, pid, "stdio"
	return s
}

// HTTP returns s as a Streamable HTTP sidecar records it in session.
func HTTP(s hindsight.Step, session string) hindsight.Step {
	s.SessionID, s.Transport = session, "streamable-http"
	return s
}

// Explicit returns s with the explicit task id task.
func Explicit(s hindsight.Step, task string) hindsight.Step {
	s.ExplicitTask = task
	return s
}

// ExperienceLine is one line of an experience export (JSON and a
// newline): the lesson for an ENOENT of tool on server "fs", last updated
// at updated.
func ExperienceLine(id, tool, lesson string, updated time.Time) string {
	e := hindsight.Experience{ID: id, Namespace: "default", Server: "fs", Tool: tool, ErrorCode: "ENOENT",
		Situation: "reading a file that does not exist", Action: "called " + tool + " with a relative path",
		Result: "ENOENT", Lesson: lesson, Confidence: 0.9, SourceTask: "t-1", SourceSteps: []int{0, 1},
		EvidenceCount: 1, CreatedAt: updated, UpdatedAt: updated}
	b, _ := json.Marshal(e)
	return string(b) + "\n"
}
