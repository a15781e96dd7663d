package tasktest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
)

// CompactStep is a tools/call step as capture builds it: its arguments and
// result are slices of its request and response.
func CompactStep(source string, seq uint64, at time.Duration) hindsight.Step {
	s := Stdio(Step(source, seq, at), "sess", 7)
	s.Request = json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/a"}}}`)
	s.Arguments = json.RawMessage(`{"path":"/tmp/a"}`)
	s.Response = json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`)
	s.Result = json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`)
	return s
}

// Batch is a batch of n realistic steps (about 1 KiB of arguments and
// result each) from one sidecar, starting at seq.
func Batch(source string, seq uint64, n int) []hindsight.Step {
	body := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 900) + `"}]}`)
	out := make([]hindsight.Step, n)
	for i := range out {
		s := Stdio(Step(source, seq+uint64(i), time.Duration(seq+uint64(i))*time.Millisecond), "s1", 100)
		s.Arguments, s.Result = json.RawMessage(`{"path":"/data/report.csv"}`), body
		out[i] = s
	}
	return out
}

// BatchJSON encodes steps as a step batch ({"steps":[…]}), each step by
// enc (wire.AppendStep as a sidecar sends it whole, wire.AppendCompactStep
// as its outbox delivers it), failing the test when enc fails.
func BatchJSON(t testing.TB, steps []hindsight.Step, enc func([]byte, *hindsight.Step) ([]byte, error)) []byte {
	t.Helper()
	b := []byte(`{"steps":[`)
	for i := range steps {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = enc(b, &steps[i]); err != nil {
			t.Fatal(err)
		}
	}
	return append(b, "]}"...)
}
