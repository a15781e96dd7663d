package wire

import (
	"encoding/json"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// stepBatch is the body of POST /v1/steps, as encoding/json reads it.
type stepBatch struct {
	Steps []hindsight.Step `json:"steps"`
}

// base is when the test steps start.
var base = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// callStep is a tools/call step of a stdio sidecar, at base+at.
func callStep(source string, seq uint64, at time.Duration) hindsight.Step {
	return hindsight.Step{
		Source: source, Seq: seq, Server: "fs", Method: "tools/call", Tool: "read_file",
		Direction: hindsight.ClientToServer, CausalTag: hindsight.TagSuccess,
		StartedAt: base.Add(at), EndedAt: base.Add(at + 100*time.Millisecond), LatencyMS: 100,
		SessionID: "s1", HostPID: 100, Transport: "stdio",
	}
}

// richSteps are steps with every field of a Step set among them, and the
// values the scanner reads in several forms.
func richSteps() []hindsight.Step {
	var b stepBatch
	if err := json.Unmarshal([]byte(richBatch), &b); err != nil {
		panic(err)
	}
	return b.Steps
}

// richBatch is richSteps as json.Marshal would write them.
const richBatch = `{"steps":[
{"session_id":"s1","server":"fs","started_at":"2026-11-30T09:00:00Z","ended_at":"2026-11-30T09:00:00.1Z","latency_ms":100,
 "direction":"client","method":"tools/call","tool":"read_file","arguments":{"path":"/data/report.csv"},"result":{"content":[]},
 "is_error":false,"error":{"code":-32000,"message":"boom \u003c\u0026\u003e","data":{"why":"x"}},"causal_tag":"success",
 "injected":[{"channel":"instructions","experience_ids":["e1","e2"],"tokens":12}],
 "truncated":[{"field":"result","original_size":99999,"sha256":"ab"}],"local":true,
 "client_name":"claude","client_version":"1.0","protocol_version":"2025-06-18",
 "request":{"jsonrpc":"2.0",
 "id":1},"response":{"jsonrpc":"2.0","id":1,"result":{"a":[1,2.5e-3,true,null,"\u00e9\n"]}},
 "explicit_task":"rich-0","host_pid":100,"transport":"stdio","source":"sc-rich","seq":1},
{"session_id":"s1","server":"fs","started_at":"2026-11-30T11:00:01+02:00","ended_at":"2026-11-30T09:00:01.1Z","latency_ms":100,
 "direction":"client","method":"tools/call","tool":"read_file","redactions":3,"notifications":2,"error_code":"EACCES",
 "causal_tag":"success","explicit_task":"rich-1","host_pid":100,"transport":"stdio","source":"sc-rich","seq":2},
{"task_id":"t-2","step_index":7,"session_id":"s1","server":"git","started_at":"2026-11-30T09:00:02Z","latency_ms":1e-9,
 "direction":"client","method":"tools/call","tool":"git_status","causal_tag":"success","source":"sc-rich","seq":3},
{"session_id":"s3","server":"memory","started_at":"2026-11-30T10:00:00Z","method":"tools/call","is_error":true,
 "causal_tag":"failure","transport":"streamable-http","namespace":"team","error_template":"user <*> not found",
 "explicit_task":"rich-1","source":"sc-mem","seq":1},
{"session_id":"s3","server":"memory","started_at":"2026-11-30T10:00:01Z","method":"tools/call","causal_tag":"recovery",
 "explicit_task":"rich-1","source":"sc-mem","seq":2}
]}`

// compactStep is a step capture builds: its arguments and result are
// those of its request and response, so its compact encoding leaves them
// out.
func compactStep(source string, seq uint64, at time.Duration) hindsight.Step {
	s := callStep(source, seq, at)
	args, result := `{"path":"/tmp/a"}`, `{"content":[{"type":"text","text":"hello"}]}`
	s.Arguments, s.Result = json.RawMessage(args), json.RawMessage(result)
	s.Request = json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":` + args + `}}`)
	s.Response = json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":` + result + `}`)
	return s
}
