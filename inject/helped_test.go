package inject

import (
	"reflect"
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

func TestHelped(t *testing.T) {
	call := func(tool string, failed bool, ids ...string) hindsight.Step {
		s := hindsight.Step{Method: "tools/call", Tool: tool, Direction: hindsight.ClientToServer, CausalTag: hindsight.TagSuccess}
		if failed {
			s.IsError, s.CausalTag = true, hindsight.TagFailure
		}
		if len(ids) > 0 {
			s.Injected = []hindsight.Injection{{Channel: ChannelErrorResult, ExperienceIDs: ids, Tokens: 10}}
		}
		return s
	}
	local := hindsight.Step{Method: "tools/call", Tool: "query_hindsight", Local: true, Direction: hindsight.ClientToServer,
		Injected: []hindsight.Injection{{Channel: ChannelQuery, ExperienceIDs: []string{"q1", "e1"}, Tokens: 50}}}
	init := hindsight.Step{Method: "server/discover", Injected: []hindsight.Injection{{Channel: ChannelInstructions, ExperienceIDs: []string{"e1", "e2"}}}}
	tests := []struct {
		name  string
		steps []hindsight.Step
		want  []string
	}{
		{"success after lessons", []hindsight.Step{init, local, call("login", false), call("fetch_report", false)}, []string{"e1", "e2", "q1"}},
		{"recovered failure", []hindsight.Step{init, call("fetch_report", true, "e3"), call("login", false), call("fetch_report", false)}, []string{"e1", "e2", "e3"}},
		{"unrecovered failure", []hindsight.Step{init, call("fetch_report", false), call("send_invoice", true, "e3")}, nil},
		{"nothing shown", []hindsight.Step{call("login", false)}, nil},
		{"no server call", []hindsight.Step{init, local}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Helped(&hindsight.Task{Steps: tt.steps}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Helped = %v, want %v", got, tt.want)
			}
		})
	}
	if Helped(nil) != nil {
		t.Error("Helped(nil) not nil")
	}
}
