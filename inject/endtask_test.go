package inject

import (
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/tidwall/gjson"
)

const triggerReq = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"trigger_hindsight","arguments":{}}}`

// TestEndTaskTool: with EndTaskTool, trigger_hindsight is listed beside
// query_hindsight and answered by the sidecar, unless the server has a
// tool of that name; the instructions say how to end a task in one
// sentence.
func TestEndTaskTool(t *testing.T) {
	tests := []struct {
		name     string
		inj      func() *Injector
		upstream string
		want     []string // tools added
		local    bool     // trigger_hindsight answered by the sidecar
	}{
		{"on", func() *Injector { return &Injector{EndTaskTool: true} }, `{"name":"login","inputSchema":{"type":"object"}}`, []string{"query_hindsight", "trigger_hindsight"}, true},
		{"without the query tool", func() *Injector { return &Injector{EndTaskTool: true, NoQueryTool: true} }, `{"name":"login","inputSchema":{"type":"object"}}`, []string{"trigger_hindsight"}, true},
		{"server has one", func() *Injector { return &Injector{EndTaskTool: true} }, `{"name":"trigger_hindsight","inputSchema":{"type":"object"}}`, []string{"query_hindsight"}, false},
		{"off", func() *Injector { return &Injector{} }, `{"name":"login","inputSchema":{"type":"object"}}`, []string{"query_hindsight"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inj := tt.inj()
			inj.Source = &fakeSearcher{}
			h := newHarness(t, inj)
			out := h.roundTrip(listReq, `{"jsonrpc":"2.0","id":1,"result":{"tools":[`+tt.upstream+`]}}`)
			arr := gjson.GetBytes(out, "result.tools").Array()
			var added []string
			for _, tool := range arr[1:] {
				added = append(added, tool.Get("name").String())
			}
			if strings.Join(added, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("added %v, want %v: %s", added, tt.want, out)
			}
			if tt.local {
				tool := arr[len(arr)-1]
				if tool.Get("annotations.readOnlyHint").Bool() || !tool.Get("annotations.idempotentHint").Bool() || !tool.Get("inputSchema.properties.task_id").Exists() {
					t.Errorf("trigger tool = %s", tool.Raw)
				}
				if got := answerText(t, h.local(triggerReq)); got != EndTaskText {
					t.Errorf("answer = %q", got)
				}
				if ex := h.lastExchange(); !ex.Local || ex.Method != "tools/call" {
					t.Errorf("exchange local %v method %s", ex.Local, ex.Method)
				}
			} else if a := h.conn.FromClient([]byte(triggerReq)); a.Forward == nil {
				t.Errorf("trigger_hindsight not forwarded to the server")
			}
		})
	}
}

func TestEndTaskInstructions(t *testing.T) {
	for _, tt := range []struct {
		name string
		inj  func() *Injector
		want []string
		not  []string
	}{
		{"tool", func() *Injector { return &Injector{EndTaskTool: true, EndTaskHint: true} }, []string{"call trigger_hindsight", `"io.hindsight/final": true`}, nil},
		{"flag only", func() *Injector { return &Injector{EndTaskHint: true} }, []string{`"io.hindsight/final": true`}, []string{"trigger_hindsight"}},
		{"off", func() *Injector { return &Injector{} }, nil, []string{"io.hindsight/final", "trigger_hindsight"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inj := tt.inj()
			inj.Source = &fakeSearcher{list: []hindsight.ScoredExperience{}}
			h := newHarness(t, inj)
			out := h.roundTrip(initReq, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"},"instructions":"Server."}}`)
			instr := gjson.GetBytes(out, "result.instructions").String()
			for _, w := range tt.want {
				if !strings.Contains(instr, w) {
					t.Errorf("instructions lack %q: %q", w, instr)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(instr, n) {
					t.Errorf("instructions have %q: %q", n, instr)
				}
			}
			if strings.Count(instr, "When your task is finished") > 1 {
				t.Errorf("more than one sentence: %q", instr)
			}
		})
	}
}
