package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// fullStep has every field of a hindsight.Step set, so that a field added to hindsight.Step
// but not to AppendStep fails TestStepAppendJSON.
func fullStep() hindsight.Step {
	t0 := time.Date(2026, 11, 30, 16, 0, 0, 123456789, time.UTC)
	return hindsight.Step{
		TaskID: "t1", SessionID: "s<1>&", Server: "fs", StepIndex: 3,
		StartedAt: t0, EndedAt: t0.Add(1500 * time.Microsecond).In(time.FixedZone("X", 3600)), LatencyMS: 1.5,
		Direction: hindsight.Direction("client_to_server"), Method: "tools/call", Tool: "read_file",
		Arguments: json.RawMessage(`{"path":"/tmp/a\u00e9","n":[1,2]}`), Result: json.RawMessage(`{"content":[]}`),
		IsError: true, Error: &hindsight.RPCError{Code: -32602, Message: "bad \"params\"\n", Data: json.RawMessage(`{"x":1}`)},
		ErrorCode: "-32602", CausalTag: hindsight.CausalTag("failure"), Redactions: 2,
		Injected:      []hindsight.Injection{{Channel: "instructions", ExperienceIDs: []string{"e1", "e2"}, Tokens: 40}, {Channel: "error_result", Tokens: 1}},
		Notifications: 4, Truncated: []hindsight.Truncation{{Field: "result", OriginalSize: 9000, SHA256: "ab"}},
		Local: true, ClientName: "claude\u2028code", ClientVersion: "1.0", ProtocolVersion: "2025-06-18",
		Request: json.RawMessage(`{"jsonrpc":"2.0","id":1}`), Response: json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{}}`),
		ExplicitTask: "fix \x01 bug\t\b\f\r", HostPID: 42, Transport: "stdio", Source: "ob-1", Seq: 1 << 40,
		ErrorTemplate: "user <*> not found", Namespace: "team",
	}
}

// TestStepAppendJSON: AppendStep writes what json.Marshal writes, byte for
// byte, for steps whose bodies are compact JSON.
func TestStepAppendJSON(t *testing.T) {
	full := fullStep()
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("fullStep leaves Step.%s zero: set it, and make sure AppendStep writes it", v.Type().Field(i).Name)
		}
	}
	tests := map[string]hindsight.Step{
		"full":      full,
		"zero":      {},
		"minimal":   {Method: "ping", Source: "s", Seq: 1, StartedAt: time.Unix(1, 0).UTC()},
		"tiny":      {LatencyMS: 1e-7},
		"huge":      {LatencyMS: 1e21},
		"negative":  {LatencyMS: -0.25},
		"bad utf-8": {Method: "a\xffb\xc3", Tool: "\u2029<script>"},
		"empty ids": {Injected: []hindsight.Injection{{Channel: "c", ExperienceIDs: []string{}}}},
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(&s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendStep(nil, &s)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("AppendStep:\n%s\njson.Marshal:\n%s", got, want)
			}
			if h := sizeHint(&s); h < len(got) {
				t.Errorf("sizeHint %d < encoded length %d", h, len(got))
			}
		})
	}
}

func TestStepAppendJSONErrors(t *testing.T) {
	for name, s := range map[string]hindsight.Step{
		"NaN":      {LatencyMS: 0 * func() float64 { var z float64; return 1 / z }()},
		"year":     {EndedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"negative": {StartedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, err := AppendStep(nil, &s); err == nil || !strings.Contains(err.Error(), "encode step") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}
