package demo

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	hreflect "github.com/hindsight-proxy/hindsight/reflect"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, tool, text string
		want             Advice
	}{
		{"401 error", "fetch_report", "401 Unauthorized: no active session. Call login first.",
			Advice{Tool: "fetch_report", Before: []string{"login"}}},
		{"date error", "create_invoice", `400 Bad Request: invalid due_date "04/15/2026": expected YYYY-MM-DD`,
			Advice{Tool: "create_invoice", Formats: map[string]string{"due_date": "2006-01-02"}}},
		{"429 error", "send_invoice", "429 Too Many Requests: send_invoice is rate limited. Retry after 300 ms, or pass pause_ms=300 to wait server-side.",
			Advice{Tool: "send_invoice", Values: map[string]any{"pause_ms": 300.0}, Wait: 300 * time.Millisecond}},
		{"lesson: call before", "", "Call login before fetch_report (otherwise it failed with 401).",
			Advice{Tool: "fetch_report", Before: []string{"login"}}},
		{"lesson: chain", "export", "Call login then select_org before export.",
			Advice{Tool: "export", Before: []string{"login", "select_org"}}},
		{"lesson about another tool", "fetch_report", "Call login before create_invoice.", Advice{Tool: "fetch_report"}},
		{"lesson: form", "", `When calling create_invoice, pass due_date in the form NNNN-NN-NN (like "2026-04-15"), not NN/NN/NNNN (like "04/15/2026") (otherwise it failed with 400).`,
			Advice{Tool: "create_invoice", Formats: map[string]string{"due_date": "2006-01-02"}}},
		{"lesson: added arg", "send_invoice", "When calling send_invoice, pass pause_ms (e.g. pause_ms=300) (otherwise it failed with 429).",
			Advice{Tool: "send_invoice", Values: map[string]any{"pause_ms": 300.0}}},
		{"lesson: set", "t", `When calling t, set region to "eu-west-1", not "us"`,
			Advice{Tool: "t", Values: map[string]any{"region": "eu-west-1"}}},
		{"wait seconds", "t", "Wait 2 s between calls.", Advice{Tool: "t", Wait: 2 * time.Second}},
		{"nothing", "t", "The report is empty.", Advice{Tool: "t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.tool, tt.text)
			got.Source = ""
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q, %q)\n got %+v\nwant %+v", tt.tool, tt.text, got, tt.want)
			}
		})
	}
}

func TestDateLayout(t *testing.T) {
	for shape, want := range map[string]string{
		"YYYY-MM-DD": "2006-01-02", "NNNN-NN-NN": "2006-01-02", "DD.MM.YYYY": "02.01.2006",
		"NN/NN/NNNN": "02/01/2006", "MM/DD/YYYY": "01/02/2006", "YYYY-MM": "", "NN-NN-NN": "",
	} {
		if got := dateLayout(shape); got != want {
			t.Errorf("dateLayout(%q) = %q, want %q", shape, got, want)
		}
	}
}

func TestLessons(t *testing.T) {
	instructions := "[Hindsight] Lessons learned in past runs with this server:\n" +
		"- fetch_report: Call login before fetch_report (otherwise it failed with 401).\n" +
		"- send_invoice: When calling send_invoice, pass pause_ms (e.g. pause_ms=300).\n" +
		"Before a tool you are unsure of, and after an error, call the query_hindsight tool."
	answer := "[Hindsight] Past experience with this server, most relevant first:\n\n" +
		"1. create_invoice (error 400, confidence 0.80)\n   Lesson: When calling create_invoice, pass due_date in the form NNNN-NN-NN.\n   Situation: x\n\n" +
		"2. (any tool)\n   Lesson: Call login before fetch_report."
	errBlock := "[Hindsight] Lessons from past runs about send_invoice and this error:\n- Pass pause_ms=300."
	tests := []struct {
		tool, text string
		want       []Lesson
	}{
		{"", instructions, []Lesson{{"fetch_report", "Call login before fetch_report (otherwise it failed with 401)."}, {"send_invoice", "When calling send_invoice, pass pause_ms (e.g. pause_ms=300)."}}},
		{"create_invoice", answer, []Lesson{{"create_invoice", "When calling create_invoice, pass due_date in the form NNNN-NN-NN."}, {"", "Call login before fetch_report."}}},
		{"send_invoice", errBlock, []Lesson{{"send_invoice", "Pass pause_ms=300."}}},
	}
	for _, tt := range tests {
		if got := Lessons(tt.tool, tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Lessons(%q)\n got %q\nwant %q", tt.text, got, tt.want)
		}
	}
}

// TestParseRuleLessons runs the real rule-based reflector on a trace shaped
// like the demo's first run, and checks the agent understands every lesson
// it derives: the demo's second run depends on it.
func TestParseRuleLessons(t *testing.T) {
	step := func(i int, tool, args, text string, isErr bool) hindsight.Step {
		res, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}, "isError": isErr})
		tag := hindsight.TagSuccess
		if isErr {
			tag = hindsight.TagFailure
		}
		return hindsight.Step{TaskID: "t", Server: "example", StepIndex: i, Method: "tools/call", Tool: tool,
			Arguments: json.RawMessage(args), Result: res, IsError: isErr, CausalTag: tag, Direction: hindsight.ClientToServer}
	}
	task := &hindsight.Task{ID: "t", Final: true, Steps: []hindsight.Step{
		step(0, "fetch_report", `{"month":"2026-03"}`, "401 Unauthorized: no active session. Call login first.", true),
		step(1, "login", `{"user":"demo","password":"[REDACTED]"}`, "Logged in as demo.", false),
		step(2, "fetch_report", `{"month":"2026-03"}`, "Billable usage for 2026-03", false),
		step(3, "create_invoice", `{"amount":1420.5,"customer":"Acme GmbH","due_date":"04/15/2026"}`, `400 Bad Request: invalid due_date "04/15/2026": expected YYYY-MM-DD`, true),
		step(4, "create_invoice", `{"amount":1420.5,"customer":"Acme GmbH","due_date":"2026-04-15"}`, "Created invoice INV-0001", false),
		step(5, "send_invoice", `{"invoice_id":"INV-0001"}`, "429 Too Many Requests: send_invoice is rate limited. Retry after 300 ms, or pass pause_ms=300 to wait server-side.", true),
		step(6, "send_invoice", `{"invoice_id":"INV-0001","pause_ms":300}`, "Sent invoice INV-0001 to Acme GmbH.", false),
	}}
	exps, err := hreflect.Rules{}.Reflect(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Advice{}
	for _, e := range exps {
		a := Parse(e.Tool, e.Lesson)
		t.Logf("%s: %s → %+v", e.Tool, e.Lesson, a)
		got[e.Tool] = a
	}
	if a := got["fetch_report"]; !reflect.DeepEqual(a.Before, []string{"login"}) {
		t.Errorf("fetch_report: before = %v", a.Before)
	}
	if a := got["create_invoice"]; a.Formats["due_date"] != "2006-01-02" {
		t.Errorf("create_invoice: formats = %v", a.Formats)
	}
	if a := got["send_invoice"]; a.Values["pause_ms"] != 300.0 {
		t.Errorf("send_invoice: values = %v", a.Values)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("fetch_report", "Call login before fetch_report.")
	f.Add("", `When calling x, pass d in the form NNNN-NN-NN (like "2026-04-15"), set n to 3, (e.g. p=1) retry after 9 ms`)
	f.Add("t", "invalid due_date \"x\": expected DD.MM.YYYY")
	f.Fuzz(func(t *testing.T, tool, text string) {
		a := Parse(tool, text)
		for arg, layout := range a.Formats {
			if arg == "" || dateLayout(layout) != "" && layout == "" {
				t.Fatalf("bad format %q → %q", arg, layout)
			}
		}
		if a.Wait < 0 {
			t.Fatalf("negative wait %v", a.Wait)
		}
		for _, l := range Lessons(tool, text) {
			_ = Parse(l.Tool, l.Text)
		}
	})
}
