package tasktest

import (
	"encoding/json"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// GoldenSteps are two explicit tasks on two servers with a failure and a
// recovery: the same bytes every run.
func GoldenSteps() []hindsight.Step {
	s := func(src string, seq uint64, task, session, server, tool string, at time.Duration, tag hindsight.CausalTag) hindsight.Step {
		st := hindsight.Step{Source: src, Seq: seq, ExplicitTask: task, SessionID: session, Server: server,
			Method: "tools/call", Tool: tool, Direction: hindsight.ClientToServer, Transport: "stdio", HostPID: 4242,
			StartedAt: T0.Add(at), EndedAt: T0.Add(at + 12500*time.Microsecond), LatencyMS: 12.5,
			Arguments: json.RawMessage(`{"path":"/data/report.csv"}`), CausalTag: tag}
		switch tag {
		case hindsight.TagFailure:
			st.IsError, st.ErrorCode = true, "ENOENT"
			st.Result = json.RawMessage(`{"content":[{"type":"text","text":"ENOENT: no such file"}],"isError":true}`)
		default:
			st.Result = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
		}
		return st
	}
	// golden-a goes final and is reflected on: routine successes, which
	// teach nothing, so reflection adds no experience. golden-b, with its
	// failure and recovery, stays open.
	return []hindsight.Step{
		s("sc-fs", 1, "golden-a", "s1", "fs", "list_directory", 0, hindsight.TagSuccess),
		s("sc-fs", 2, "golden-a", "s1", "fs", "read_file", time.Second, hindsight.TagSuccess),
		s("sc-git", 1, "golden-a", "s2", "git", "git_status", 2*time.Second, hindsight.TagSuccess),
		s("sc-mem", 1, "golden-b", "s3", "memory", "read_file", time.Hour, hindsight.TagFailure),
		s("sc-mem", 2, "golden-b", "s3", "memory", "read_file", time.Hour+time.Second, hindsight.TagRecovery),
	}
}
