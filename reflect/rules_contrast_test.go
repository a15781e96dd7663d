package reflect

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// traceBuilder builds a small task step by step: tool calls numbered in
// order, all from one client.
type traceBuilder struct{ task hindsight.Task }

func newTrace(id string) *traceBuilder {
	return &traceBuilder{task: hindsight.Task{ID: id, Final: true}}
}

func (b *traceBuilder) add(s hindsight.Step) *traceBuilder {
	s.TaskID, s.StepIndex, s.Direction = b.task.ID, len(b.task.Steps), hindsight.ClientToServer
	if s.Server == "" {
		s.Server = "shop"
	}
	b.task.Steps = append(b.task.Steps, s)
	return b
}

// textResult is a tools/call result with one text item.
func textResult(text string, isError bool) json.RawMessage {
	r := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
	if isError {
		r["isError"] = true
	}
	b, _ := json.Marshal(r)
	return b
}

// ok adds a successful call of tool on the default server.
func (b *traceBuilder) ok(tool, args, text string) *traceBuilder {
	return b.okOn("", tool, args, text)
}

func (b *traceBuilder) okOn(server, tool, args, text string) *traceBuilder {
	return b.add(hindsight.Step{Server: server, Method: "tools/call", Tool: tool, Arguments: json.RawMessage(args),
		Result: textResult(text, false), CausalTag: hindsight.TagSuccess})
}

// fail adds a call of tool that returned an error result with text.
func (b *traceBuilder) fail(tool, args, text, code string) *traceBuilder {
	return b.add(hindsight.Step{Method: "tools/call", Tool: tool, Arguments: json.RawMessage(args),
		Result: textResult(text, true), IsError: true, ErrorCode: code, CausalTag: hindsight.TagFailure})
}

// list adds a tools/list step whose result is tools.
func (b *traceBuilder) list(tools string) *traceBuilder {
	return b.add(hindsight.Step{Method: "tools/list", Result: json.RawMessage(`{"tools":` + tools + `}`), CausalTag: hindsight.TagSuccess})
}

func (b *traceBuilder) build() *hindsight.Task {
	t := b.task
	t.StepCount = len(t.Steps)
	return &t
}

// contrastCases are recoveries where what made the difference has to be
// told from what merely happened nearby.
var contrastCases = []struct {
	name    string
	task    *hindsight.Task
	tool    string
	steps   []int    // the lesson's source steps
	contain []string // in situation | lesson
	absent  []string // in any text an agent reads
	conf    float64
	vacuous bool // validation refuses it: the advice restates the error
}{
	{
		// (a) A no-op between the failure and a fixed retry: the fix
		// explains the recovery, think does not.
		name: "think before an argument fix",
		task: newTrace("t-think-fix").
			fail("get_weather", `{"city":"Pariss"}`, "unknown city", "404").
			ok("think", `{"thought":"maybe a typo in the city"}`, "").
			ok("get_weather", `{"city":"Paris"}`, `{"temp_c": 11}`).build(),
		tool: "get_weather", steps: []int{0, 2},
		contain: []string{"pass a different, valid city", "`unknown city`"},
		absent:  []string{"think", "Pariss", "Paris"},
		conf:    singlePrior,
		vacuous: true,
	},
	{
		// (b) The identical call again after think: the failure passed by
		// itself, think was no precondition.
		name: "identical retry after think",
		task: newTrace("t-think-retry").
			fail("search_docs", `{"query":"refund policy"}`, "service temporarily unavailable", "503").
			ok("think", `{"thought":"retry"}`, "Thought logged: the search backend may be flaky, retry it.").
			ok("search_docs", `{"query":"refund policy"}`, `[{"doc":"refunds.md"}]`).build(),
		tool: "search_docs", steps: []int{0, 2},
		contain: []string{"retry the identical call once", "`service temporarily unavailable`"},
		absent:  []string{"think", "call think before", "refund policy"},
		conf:    unambiguousPrior, // the error says it is temporary
	},
	{
		// (b') A tool that only ever acknowledges is a no-op whatever its
		// name.
		name: "identical retry after an acknowledging tool",
		task: newTrace("t-scratch-retry").
			fail("search_docs", `{"query":"refund policy"}`, "internal error", "500").
			ok("scratchpad", `{"text":"search failed"}`, "noted").
			ok("search_docs", `{"query":"refund policy"}`, `[{"doc":"refunds.md"}]`).build(),
		tool: "search_docs", steps: []int{0, 2},
		contain: []string{"retry the identical call once", "`internal error`"},
		absent:  []string{"scratchpad"},
		conf:    singlePrior,
	},
	{
		// (c) auth_refresh succeeded before the first failure too: the
		// failure happened with it, so it cannot be what fixed it.
		name: "called before the first failure too",
		task: newTrace("t-before").
			ok("auth_refresh", `{}`, `{"expires_in": 3600}`).
			fail("list_orders", `{"status":"open"}`, "session expired", "401").
			ok("auth_refresh", `{}`, `{"expires_in": 3600}`).
			ok("list_orders", `{"status":"open"}`, `[{"id": 17}]`).build(),
		tool: "list_orders", steps: []int{1, 3},
		contain: []string{"retry the identical call once"},
		absent:  []string{"auth_refresh", "before list_orders"},
		conf:    singlePrior,
	},
	{
		// (d) The error names the tool to call first: an unambiguous
		// precondition.
		name: "precondition named by the error",
		task: newTrace("t-named").
			fail("list_orders", `{"status":"open"}`, "401: token expired, call auth_refresh first", "401").
			ok("auth_refresh", `{}`, `{"expires_in": 3600}`).
			ok("list_orders", `{"status":"open"}`, `[{"id": 17}]`).build(),
		tool: "list_orders", steps: []int{0, 1, 2},
		contain: []string{"Call auth_refresh before list_orders (otherwise list_orders fails with `"},
		absent:  []string{"3600"},
		conf:    unambiguousPrior,
	},
	{
		// (e) A substantial call in between, nothing else changed, the
		// error does not name it: a precondition, but at the confidence of
		// one observation, below the injection gate.
		name: "precondition not named",
		task: newTrace("t-unnamed").
			fail("list_orders", `{"status":"open"}`, "403 forbidden: no active session", "403").
			ok("open_session", `{"user":"ann"}`, `{"session":"s-8841"}`).
			ok("list_orders", `{"status":"open"}`, `[{"id": 17}]`).build(),
		tool: "list_orders", steps: []int{0, 1, 2},
		contain: []string{"Call open_session before list_orders (otherwise list_orders fails with `"},
		absent:  []string{"s-8841", "ann"},
		conf:    singlePrior,
	},
	{
		// (f) The id that worked was found in an earlier lookup's result
		// on the same server.
		name: "id taken from a lookup",
		task: newTrace("t-lookup").
			ok("find_customer", `{"email":"ann.lee@example.com"}`, `{"customer_id":"cus_8842","name":"Ann Lee"}`).
			fail("create_invoice", `{"customer_id":"cust-ann","amount":120}`, "customer cust-ann not found", "404").
			ok("create_invoice", `{"customer_id":"cus_8842","amount":120}`, `{"invoice":"in_5521"}`).build(),
		tool: "create_invoice", steps: []int{0, 1, 2},
		contain: []string{"take customer_id from the result of find_customer", "`customer <*> not found`"},
		absent:  []string{"cus_8842", "cust-ann", "ann.lee@example.com", "Ann Lee", "120", "in_5521"},
		conf:    singlePrior,
	},
	{
		// (f') The same lookup on another server is no source: its ids are
		// not this server's.
		name: "lookup on another server",
		task: newTrace("t-lookup-other").
			okOn("crm", "find_customer", `{"email":"ann.lee@example.com"}`, `{"customer_id":"cus_8842","name":"Ann Lee"}`).
			fail("create_invoice", `{"customer_id":"cust-ann","amount":120}`, "customer cust-ann not found", "404").
			ok("create_invoice", `{"customer_id":"cus_8842","amount":120}`, `{"invoice":"in_5521"}`).build(),
		tool: "create_invoice", steps: []int{1, 2},
		contain: []string{"pass a different, valid customer_id"},
		absent:  []string{"find_customer", "cus_8842", "cust-ann"},
		conf:    singlePrior,
		vacuous: true,
	},
	{
		// (g) A date reshaped as the error asks: a shape lesson,
		// unambiguous.
		name: "date shape asked for",
		task: newTrace("t-date").
			fail("create_event", `{"title":"Standup","date":"01/15/2026"}`, "invalid date 01/15/2026: expected YYYY-MM-DD", "400").
			ok("create_event", `{"title":"Standup","date":"2026-01-15"}`, "created event 42").build(),
		tool: "create_event", steps: []int{0, 1},
		contain: []string{"pass date as YYYY-MM-DD, not MM/DD/YYYY", "expected YYYY-MM-DD`"},
		absent:  []string{"01/15/2026", "2026-01-15", "Standup", "42"},
		conf:    unambiguousPrior,
	},
	{
		// (g') The error asks for a format without naming the argument.
		name: "date shape asked for, argument not named",
		task: newTrace("t-date-unnamed").
			fail("book_room", `{"room":"Ada","start":"20/03/2026"}`, "bad request: expected YYYY-MM-DD", "400").
			ok("book_room", `{"room":"Ada","start":"2026-03-20"}`, `{"booking":"B-981"}`).build(),
		tool: "book_room", steps: []int{0, 1},
		contain: []string{"pass start as YYYY-MM-DD, not DD/MM/YYYY", "`bad request: expected YYYY-MM-DD`"},
		absent:  []string{"20/03/2026", "2026-03-20", "Ada", "B-981"},
		conf:    unambiguousPrior,
	},
	{
		// (h) Four arguments changed at once; the error names one: the
		// lesson is about that one only.
		name: "one of four changes named",
		task: newTrace("t-four").
			fail("create_ticket", `{"title":"Printer jam","assignee":"bob","labels":"hw","due":"03/20/2026"}`, "invalid due: expected YYYY-MM-DD", "400").
			ok("create_ticket", `{"title":"Printer jammed on floor 2","assignee":"carol","labels":"hardware","due":"2026-03-20"}`, `{"ticket":"T-77"}`).build(),
		tool: "create_ticket", steps: []int{0, 1},
		contain: []string{"pass due as YYYY-MM-DD, not MM/DD/YYYY"},
		absent:  []string{"title", "assignee", "labels", "Printer", "carol", "2026-03-20", "T-77", ";"},
		conf:    unambiguousPrior,
	},
	{
		// (i) An argument added whose schema (from tools/list) has an
		// enum: the lesson lists the constants.
		name: "added argument with a schema enum",
		task: newTrace("t-enum").
			list(`[{"name":"list_orders","inputSchema":{"type":"object","properties":{"status":{"type":"string","enum":["open","closed","all"]}}}}]`).
			fail("list_orders", `{}`, "missing required argument: status", "400").
			ok("list_orders", `{"status":"open"}`, `[{"id": 17}]`).build(),
		tool: "list_orders", steps: []int{1, 2},
		contain: []string{`pass status (one of "open", "closed", "all")`},
		conf:    unambiguousPrior,
	},
	{
		// (j) The error prescribes the value: quoting it is no leak.
		name: "value prescribed by the error",
		task: newTrace("t-pause").
			fail("fetch_page", `{"url":"https://shop.test/p/981"}`, "rate limited: retry after 300 ms or pass pause_ms=300", "429").
			ok("fetch_page", `{"url":"https://shop.test/p/981","pause_ms":300}`, "<html>…</html>").build(),
		tool: "fetch_page", steps: []int{0, 1},
		contain: []string{"pass pause_ms=300, as the error asks"},
		absent:  []string{"shop.test", "981"},
		conf:    unambiguousPrior,
	},
}

// TestRulesContrast checks that a call is a precondition only when the
// evidence contrasts, and that fixes are stated by name, shape, source or
// schema.
func TestRulesContrast(t *testing.T) {
	for _, c := range contrastCases {
		t.Run(c.name, func(t *testing.T) {
			exps, err := Rules{}.Reflect(context.Background(), c.task)
			if err != nil {
				t.Fatal(err)
			}
			if len(exps) != 1 {
				t.Fatalf("got %d experiences, want 1: %+v", len(exps), exps)
			}
			e := exps[0]
			t.Logf("lesson: %s\naction: %s\ntemplate: %s", e.Lesson, e.Action, e.ErrorTemplate)
			if e.Tool != c.tool || e.Origin != "rules" || e.ErrorTemplate == "" {
				t.Errorf("tool %q origin %q template %q, want %s, rules and a template", e.Tool, e.Origin, e.ErrorTemplate, c.tool)
			}
			if !slicesEqual(e.SourceSteps, c.steps) {
				t.Errorf("source steps %v, want %v", e.SourceSteps, c.steps)
			}
			text := e.Situation + " | " + e.Lesson
			for _, s := range c.contain {
				if !strings.Contains(text, s) {
					t.Errorf("lesson %q lacks %q", text, s)
				}
			}
			all := strings.Join([]string{e.Situation, e.Lesson, e.Action, e.Result, e.ErrorTemplate}, " | ")
			for _, s := range c.absent {
				if strings.Contains(all, s) {
					t.Errorf("experience mentions %q: %q", s, all)
				}
			}
			if e.Confidence != c.conf {
				t.Errorf("confidence %v, want %v", e.Confidence, c.conf)
			}
			// Below the gate unless the error grounds the lesson.
			if gated := e.Confidence >= DefaultInjectConfidence; gated != (c.conf == unambiguousPrior) {
				t.Errorf("confidence %v against the injection gate %v", e.Confidence, DefaultInjectConfidence)
			}
			// What the rules derive passes validation unchanged in
			// substance, confidence included.
			kept, drops := (&Validator{}).Validate(c.task, exps)
			if c.vacuous {
				if len(kept) != 0 || len(drops) != 1 || drops[0].Reason != DropVacuous {
					t.Fatalf("a lesson restating its error was not refused as vacuous: kept %+v, dropped %+v", kept, drops)
				}
				return
			}
			if len(drops) > 0 || len(kept) != 1 {
				t.Fatalf("dropped by validation: %+v", drops)
			}
			if kept[0].Confidence != c.conf || kept[0].Lesson != e.Lesson {
				t.Errorf("validated: confidence %v lesson %q", kept[0].Confidence, kept[0].Lesson)
			}
		})
	}
}

// TestRulesQuoteNoTaskValue: (k) no lesson of any rules trace, the
// contrast cases' and the golden ones', quotes a value of its own task.
func TestRulesQuoteNoTaskValue(t *testing.T) {
	tasks := map[string]*hindsight.Task{}
	for _, c := range contrastCases {
		tasks[c.name] = c.task
	}
	for name, task := range goldenTasks(t) {
		tasks[name] = task
	}
	n := 0
	for name, task := range tasks {
		vals := TaskValues(task)
		if len(vals) == 0 {
			t.Errorf("%s: no task values found", name)
		}
		exps, _ := Rules{}.Reflect(context.Background(), task)
		for _, e := range exps {
			for _, f := range []string{e.Situation, e.Lesson, e.Action, e.Result, e.ErrorTemplate} {
				for _, lit := range Literals(f) {
					n++
					if vals[lit] {
						t.Errorf("%s: %q quotes %q, a value of this task", name, f, lit)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no literals checked at all")
	}
}

// TestTaskValuesOfContrastCases makes sure the check above has teeth: the
// values the lessons avoid are task values, and what they may quote is not.
func TestTaskValuesOfContrastCases(t *testing.T) {
	byName := map[string]*hindsight.Task{}
	for _, c := range contrastCases {
		byName[c.name] = c.task
	}
	cases := []struct {
		task     string
		values   []string
		notValue []string
	}{
		{"id taken from a lookup", []string{"cus_8842", "cust-ann", "ann.lee@example.com", "120", "in_5521"}, []string{"customer_id", "find_customer", "404"}},
		{"date shape asked for", []string{"01/15/2026", "2026-01-15", "Standup"}, []string{"YYYY-MM-DD", "date", "400"}},
		{"added argument with a schema enum", []string{"17"}, []string{"open", "closed", "all", "status"}},
		{"value prescribed by the error", []string{"https://shop.test/p/981"}, []string{"300", "pause_ms", "429"}},
		{"precondition not named", []string{"s-8841", "ann"}, []string{"open_session", "user", "403"}},
	}
	for _, c := range cases {
		vals := TaskValues(byName[c.task])
		for _, v := range c.values {
			if !vals[v] {
				t.Errorf("%s: %q not a task value", c.task, v)
			}
		}
		for _, v := range c.notValue {
			if vals[v] {
				t.Errorf("%s: %q counted as a task value", c.task, v)
			}
		}
	}
}

// goldenTasks loads the traces of testdata/rules by name.
func goldenTasks(t *testing.T) map[string]*hindsight.Task {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "rules", "*.trace.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	out := map[string]*hindsight.Task{}
	for _, p := range paths {
		out[strings.TrimSuffix(filepath.Base(p), ".trace.json")] = tasktest.Load(t, p)
	}
	return out
}

// TestRulesNamedPlainArgument is (h) when the argument the error names
// changed to a plain value (no shape, no schema enum): the lesson should be
// about that argument alone: the named change is kept, the reshaped or
// plain changes the error does not name are incidental, and a format cue
// of the error ("invalid", "must be") grounds no argument it does not name.
func TestRulesNamedPlainArgument(t *testing.T) {
	cases := []struct {
		name string
		task *hindsight.Task
	}{
		{"beside a reshaped date", newTrace("t-prio-date").
			fail("create_ticket", `{"priority":"urgent","due":"03/20/2026"}`, "invalid priority: must be one of low, normal, high", "400").
			ok("create_ticket", `{"priority":"high","due":"2026-03-20"}`, `{"ticket":"T-77"}`).build()},
		{"beside three plain changes", newTrace("t-prio-four").
			fail("create_ticket", `{"title":"Printer jam","assignee":"bob","labels":"hw","priority":"urgent"}`, "invalid priority: must be one of low, normal, high", "400").
			ok("create_ticket", `{"title":"Printer jammed on floor 2","assignee":"carol","labels":"hardware","priority":"high"}`, `{"ticket":"T-77"}`).build()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exps, _ := Rules{}.Reflect(context.Background(), c.task)
			if len(exps) != 1 {
				t.Fatalf("got %d experiences, want 1", len(exps))
			}
			l := exps[0].Lesson
			if !strings.Contains(l, "priority") {
				t.Errorf("lesson %q is not about priority, the argument the error names", l)
			}
			for _, other := range []string{"due", "title", "assignee", "labels"} {
				if mentions(l, other) {
					t.Errorf("lesson %q names %s, which the error does not", l, other)
				}
			}
		})
	}
}
