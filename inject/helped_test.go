package inject

import (
	"encoding/json"
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

// lessonText is what Hindsight appended to an error result for each
// experience id.
var lessonText = map[string]string{
	"e1": "Call login before list_orders (otherwise list_orders fails with `<*> Unauthorized: session expired`).",
	"e7": "When list_orders fails, refresh the token with auth_refresh and pass it as session.",
}

func TestHarmed(t *testing.T) {
	// fail is a failed call of tool whose result holds the server's text
	// and, when ids are given, the lines Hindsight appended after it.
	fail := func(tool, text string, ids ...string) hindsight.Step {
		content := []any{map[string]any{"type": "text", "text": text}}
		s := hindsight.Step{Method: "tools/call", Tool: tool, Direction: hindsight.ClientToServer, IsError: true, CausalTag: hindsight.TagFailure}
		if len(ids) > 0 {
			content = append(content, map[string]any{"type": "text", "text": Marker + " Lessons from past runs about " + tool + " and this error:\n- " + lessonText[ids[0]]})
			s.Injected = []hindsight.Injection{{Channel: ChannelErrorResult, ExperienceIDs: ids, Tokens: 20}}
		}
		s.Result, _ = json.Marshal(map[string]any{"content": content, "isError": true})
		return s
	}
	ok := func(tool string) hindsight.Step {
		return hindsight.Step{Method: "tools/call", Tool: tool, Direction: hindsight.ClientToServer, CausalTag: hindsight.TagSuccess,
			Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)}
	}
	rpcFail := func(tool, msg string, ids ...string) hindsight.Step {
		s := hindsight.Step{Method: "tools/call", Tool: tool, Direction: hindsight.ClientToServer, Error: &hindsight.RPCError{Code: -32000, Message: msg}, CausalTag: hindsight.TagFailure}
		if len(ids) > 0 {
			s.Injected = []hindsight.Injection{{Channel: ChannelErrorResult, ExperienceIDs: ids}}
		}
		return s
	}
	withTemplate := func(s hindsight.Step, tpl string) hindsight.Step { s.ErrorTemplate = tpl; return s }
	const unauthorized = "401 Unauthorized: session expired"
	okWithText := func(tool, text string) hindsight.Step {
		s := ok(tool)
		s.Result, _ = json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
		return s
	}
	otherChannel := func(s hindsight.Step, channel string) hindsight.Step {
		s.Injected = []hindsight.Injection{{Channel: channel, ExperienceIDs: []string{"e9"}}}
		return s
	}
	tests := []struct {
		name  string
		steps []hindsight.Step
		want  []string
	}{
		{"same error again", []hindsight.Step{fail("list_orders", unauthorized, "e1", "e2"), fail("list_orders", unauthorized)}, []string{"e1", "e2"}},
		{"succeeded next", []hindsight.Step{fail("list_orders", unauthorized, "e1"), ok("list_orders")}, nil},
		{"succeeded next with the same text", []hindsight.Step{fail("list_orders", unauthorized, "e1"), okWithText("list_orders", unauthorized)}, nil},
		{"shown through another channel", []hindsight.Step{otherChannel(fail("list_orders", unauthorized), ChannelQuery), fail("list_orders", unauthorized)}, nil},
		{"different error next", []hindsight.Step{fail("list_orders", unauthorized, "e1"), fail("list_orders", "400 Bad Request: unknown status")}, nil},
		// The lines Hindsight appended to both results differ; the
		// server's texts do not.
		{"injected text differs", []hindsight.Step{fail("list_orders", unauthorized, "e1"), fail("list_orders", unauthorized, "e7")}, []string{"e1"}},
		{"variable part differs", []hindsight.Step{fail("get_user", "user 17 not found", "e7"), fail("get_user", "user 42 not found")}, []string{"e7"}},
		{"templates decide", []hindsight.Step{
			withTemplate(fail("get_user", "user ann not found", "e1"), "user <*> not found"),
			withTemplate(fail("get_user", "user bob not found"), "user <*> not found")}, []string{"e1"}},
		{"templates differ", []hindsight.Step{
			withTemplate(fail("get_user", "user ann not found", "e1"), "user <*> not found"),
			withTemplate(fail("get_user", "user ann not found"), "user ann not found")}, nil},
		{"JSON-RPC error", []hindsight.Step{rpcFail("list_orders", "session expired", "e1"), rpcFail("list_orders", "session expired")}, []string{"e1"}},
		// Only the next call of the same tool counts.
		{"other tool fails in between", []hindsight.Step{fail("list_orders", unauthorized, "e1"), fail("login", unauthorized), ok("list_orders")}, nil},
		{"other tool succeeds in between", []hindsight.Step{fail("list_orders", unauthorized, "e1"), ok("login"), fail("list_orders", unauthorized)}, []string{"e1"}},
		{"second retry fails only", []hindsight.Step{fail("list_orders", unauthorized, "e1"), fail("list_orders", "400 Bad Request: unknown status"), fail("list_orders", unauthorized)}, nil},
		{"never called again", []hindsight.Step{fail("list_orders", unauthorized, "e1"), ok("login")}, nil},
		{"nothing shown", []hindsight.Step{fail("list_orders", unauthorized), fail("list_orders", unauthorized)}, nil},
		{"counted once", []hindsight.Step{fail("list_orders", unauthorized, "e1"), fail("list_orders", unauthorized, "e1"), fail("list_orders", unauthorized)}, []string{"e1"}},
		{"shown in the instructions only", []hindsight.Step{
			{Method: "server/discover", Injected: []hindsight.Injection{{Channel: ChannelInstructions, ExperienceIDs: []string{"e9"}}}},
			fail("list_orders", unauthorized), fail("list_orders", unauthorized)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Harmed(&hindsight.Task{Steps: tt.steps}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Harmed = %v, want %v", got, tt.want)
			}
		})
	}
	if Harmed(nil) != nil {
		t.Error("Harmed(nil) not nil")
	}
}
