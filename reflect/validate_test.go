package reflect

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// fakeSecrets stands in for the capture redactor: it replaces bearer tokens
// and sk- keys.
var fakeSecrets = RedactorFunc(func(s string) (string, int) {
	re := regexp.MustCompile(`sk-[A-Za-z0-9]{16,}|Bearer [A-Za-z0-9._-]{10,}`)
	n := len(re.FindAllString(s, -1))
	return re.ReplaceAllString(s, "[REDACTED]"), n
})

func TestValidate(t *testing.T) {
	task := tasktest.Load(t, filepath.Join("testdata", "rules", "login_401.trace.json"))
	good := hindsight.Experience{
		Situation: "list_orders returns 401 before login", Action: "called login", Result: "ok",
		Lesson: "Call login before list_orders; without it list_orders fails with 401.", Confidence: 0.9,
		SourceSteps: []int{2, 3, 4}, Tool: "list_orders",
	}
	with := func(f func(e *hindsight.Experience)) hindsight.Experience {
		e := good
		e.SourceSteps = append([]int(nil), good.SourceSteps...)
		f(&e)
		return e
	}
	cases := []struct {
		name   string
		in     hindsight.Experience
		reason string
	}{
		{"good", good, ""},
		{"no lesson", with(func(e *hindsight.Experience) { e.Lesson = " " }), DropIncomplete},
		{"no situation", with(func(e *hindsight.Experience) { e.Situation = "" }), DropIncomplete},
		{"no steps", with(func(e *hindsight.Experience) { e.SourceSteps = nil }), DropNoSteps},
		{"invented step", with(func(e *hindsight.Experience) { e.SourceSteps = []int{2, 9} }), DropInventedStep},
		{"negative step", with(func(e *hindsight.Experience) { e.SourceSteps = []int{-1} }), DropInventedStep},
		{"tool not cited", with(func(e *hindsight.Experience) { e.SourceSteps = []int{3} }), DropToolMismatch},
		{"unknown tool", with(func(e *hindsight.Experience) { e.Tool = "delete_orders" }), DropToolMismatch},
		{"low confidence", with(func(e *hindsight.Experience) { e.Confidence = 0.4 }), DropLowConfidence},
		{"missing confidence", with(func(e *hindsight.Experience) { e.Confidence = nan() }), DropLowConfidence},
		{"be careful", with(func(e *hindsight.Experience) { e.Lesson = "Be careful when calling list_orders." }), DropVague},
		{"double check", with(func(e *hindsight.Experience) { e.Lesson = "Always double-check your inputs before making calls." }), DropVague},
		{"generic", with(func(e *hindsight.Experience) { e.Lesson = "Handle errors gracefully and try again later." }), DropVague},
		{"acronyms only", with(func(e *hindsight.Experience) { e.Lesson = "Be careful with the API and check the JSON you send." }), DropVague},
		{"too short", with(func(e *hindsight.Experience) { e.Lesson = "Login first." }), DropVague},
		{"names argument", with(func(e *hindsight.Experience) { e.Lesson = "Pass status as one of open or closed to the orders tool." }), ""},
		{"careful but concrete", with(func(e *hindsight.Experience) {
			e.Lesson = "Be careful: list_orders needs login called first, else 401."
		}), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewMetrics()
			v := &Validator{Metrics: m}
			kept, drops := v.Validate(task, []hindsight.Experience{c.in})
			if c.reason == "" {
				if len(kept) != 1 {
					t.Fatalf("dropped: %+v", drops)
				}
				e := kept[0]
				if e.SourceTask != task.ID || e.Server != "shop" || e.ErrorCode != "401" || e.SourceAgent != "claude-code" {
					t.Errorf("not completed from the trace: %+v", e)
				}
				return
			}
			if len(drops) != 1 || drops[0].Reason != c.reason {
				t.Fatalf("drops %+v, want reason %s", drops, c.reason)
			}
			if got := m.Dropped()[c.reason]; got != 1 {
				t.Errorf("counter %s = %d, want 1", c.reason, got)
			}
		})
	}
}

func TestValidateFillsToolAndRedacts(t *testing.T) {
	task := tasktest.Load(t, filepath.Join("testdata", "rules", "login_401.trace.json"))
	e := hindsight.Experience{
		Situation:   "list_orders says 401 Unauthorized",
		Lesson:      "Call login before list_orders, then pass its session with each call.",
		Action:      "used key sk-abcdefghijklmnop1234",
		Confidence:  0.8,
		SourceSteps: []int{4, 2, 2},
	}
	kept, _ := (&Validator{Redactor: fakeSecrets}).Validate(task, []hindsight.Experience{e})
	if len(kept) != 1 {
		t.Fatal("dropped")
	}
	got := kept[0]
	if got.Tool != "list_orders" {
		t.Errorf("tool %q, want list_orders from the failing cited step", got.Tool)
	}
	if !slicesEqual(got.SourceSteps, []int{2, 4}) {
		t.Errorf("steps %v, want sorted and unique", got.SourceSteps)
	}
	if strings.Contains(got.Action, "sk-abc") || !strings.Contains(got.Action, "[REDACTED]") {
		t.Errorf("secret kept: %q", got.Action)
	}
	// A lesson built on a secret is refused, not redacted.
	e.Lesson = "Call login before list_orders, then send Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def with each call."
	if kept, drops := (&Validator{Redactor: fakeSecrets}).Validate(task, []hindsight.Experience{e}); len(kept) != 0 || len(drops) != 1 || drops[0].Reason != DropCredential {
		t.Errorf("a lesson quoting a token: kept %+v, drops %+v", kept, drops)
	}
}

func nan() float64 { var z float64; return z / z }

// invoiceTask is a task whose values a lesson must not quote: a customer's
// e-mail, name, ids, an amount and dates; and whose schema, error code and
// error text give what a lesson may quote.
func invoiceTask() *hindsight.Task {
	return newTrace("t-invoice").
		list(`[{"name":"create_invoice","inputSchema":{"type":"object","properties":{"customer_id":{"type":"string"},"amount":{"type":"number"},"currency":{"type":"string","enum":["EUR","USD"]},"due_date":{"type":"string"},"pause_ms":{"type":"integer"}}}}]`).
		ok("find_customer", `{"email":"ann.lee@example.com"}`, `{"customer_id":"cus_8842","name":"Ann Lee","balance":1250.5}`).
		fail("create_invoice", `{"customer_id":"cust-ann","amount":1250.5,"currency":"eur","due_date":"03/20/2026"}`,
			"422 Unprocessable: invalid due_date, expected YYYY-MM-DD; retry after 300 ms or pass pause_ms=300", "422").
		ok("create_invoice", `{"customer_id":"cus_8842","amount":1250.5,"currency":"EUR","due_date":"2026-03-20","pause_ms":300}`, `{"invoice":"in_5521"}`).
		build()
}

// TestValidateOneOff: a model's lesson that quotes a value of its task is
// dropped (DropOneOff); one that quotes what the schema, the error code
// or the error text give is kept, at the confidence its evidence supports
// whatever the model claimed.
func TestValidateOneOff(t *testing.T) {
	task := invoiceTask()
	vals := TaskValues(task)
	cases := []struct {
		name   string
		lesson string
		quotes string  // the task value quoted, for a drop
		conf   float64 // the stored confidence, for a keep
	}{
		{"argument id", `Pass customer_id "cus_8842" to create_invoice instead of a guessed one.`, "cus_8842", 0},
		{"amount from a result", "create_invoice needs amount 1250.5 for this customer_id.", "1250.5", 0},
		{"e-mail", "Look up customer_id by ann.lee@example.com with find_customer before create_invoice.", "ann.lee@example.com", 0},
		{"date", "Set due_date to 2026-03-20 when calling create_invoice.", "2026-03-20", 0},
		{"name, quoted", `Invoices for "Ann Lee" need customer_id from find_customer before create_invoice.`, "Ann Lee", 0},
		{"failed id", `create_invoice rejects customer_id "cust-ann"; take it from find_customer.`, "cust-ann", 0},
		{"schema enum constants", `Pass currency to create_invoice as "EUR" or "USD", in upper case.`, "", singlePrior},
		{"error code", "When create_invoice fails with 422, the due_date is not in the form YYYY-MM-DD.", "", unambiguousPrior},
		{"value the error prescribes", "When create_invoice is rate limited, pass pause_ms=300 as the error says.", "", unambiguousPrior},
		{"shape", "Pass due_date to create_invoice as YYYY-MM-DD, not MM/DD/YYYY.", "", unambiguousPrior},
		{"shape, argument not named", "Dates go to create_invoice as YYYY-MM-DD, not MM/DD/YYYY.", "", unambiguousPrior},
		{"argument and tool names", "Take `customer_id` from the result of `find_customer` before calling create_invoice.", "", singlePrior},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := hindsight.Experience{
				Tool: "create_invoice", Situation: "create_invoice failed with 422", Action: "changed the arguments", Result: "create_invoice succeeded",
				Lesson: c.lesson, Confidence: 0.95, Origin: "llm:m", SourceSteps: []int{1, 2, 3},
			}
			m := NewMetrics()
			kept, drops := (&Validator{Metrics: m}).Validate(task, []hindsight.Experience{in})
			if c.quotes != "" {
				if !vals[c.quotes] {
					t.Fatalf("test value %q is not a task value", c.quotes)
				}
				if len(drops) != 1 || drops[0].Reason != DropOneOff || !strings.Contains(drops[0].Detail, c.quotes) {
					t.Fatalf("drops %+v, want %s quoting %q", drops, DropOneOff, c.quotes)
				}
				if m.Dropped()[DropOneOff] != 1 {
					t.Errorf("counters %v", m.Dropped())
				}
				return
			}
			if len(kept) != 1 {
				t.Fatalf("dropped: %+v", drops)
			}
			e := kept[0]
			if e.Origin != "llm:m" || e.Lesson != c.lesson {
				t.Errorf("origin %q lesson %q changed", e.Origin, e.Lesson)
			}
			// The model said 0.95; one task supports 0.5, or 0.667 when
			// the error names what the lesson is about.
			if e.Confidence != c.conf {
				t.Errorf("confidence %v, want the evidence prior %v", e.Confidence, c.conf)
			}
			if e.ErrorTemplate == "" || strings.Contains(e.ErrorTemplate, "03/20/2026") {
				t.Errorf("template %q", e.ErrorTemplate)
			}
		})
	}
}

// TestValidateOneOffFields: a value quoted in any text an agent reads is a
// one-off, not only in the lesson.
func TestValidateOneOffFields(t *testing.T) {
	task := invoiceTask()
	clean := hindsight.Experience{
		Tool: "create_invoice", Situation: "create_invoice failed with 422", Action: "changed due_date", Result: "create_invoice succeeded",
		Lesson: "Pass due_date to create_invoice as YYYY-MM-DD, not MM/DD/YYYY.", Confidence: 0.95, Origin: "llm:m", SourceSteps: []int{2, 3},
	}
	for name, set := range map[string]func(e *hindsight.Experience){
		"situation": func(e *hindsight.Experience) { e.Situation = "create_invoice failed for cus_8842" },
		"action":    func(e *hindsight.Experience) { e.Action = "set due_date to 2026-03-20" },
		"result":    func(e *hindsight.Experience) { e.Result = "created invoice in_5521" },
		"template":  func(e *hindsight.Experience) { e.ErrorTemplate = "invalid due_date 03/20/2026" },
	} {
		e := clean
		set(&e)
		_, drops := (&Validator{}).Validate(task, []hindsight.Experience{e})
		if len(drops) != 1 || drops[0].Reason != DropOneOff {
			t.Errorf("%s: drops %+v, want %s", name, drops, DropOneOff)
		}
	}
	if kept, drops := (&Validator{}).Validate(task, []hindsight.Experience{clean}); len(kept) != 1 {
		t.Errorf("clean candidate dropped: %+v", drops)
	}
}

// TestEvidencePriorErrorCode: quoting the error code grounds nothing; the
// error text must name what the lesson is about. Error codes (and their
// digit runs) are names a lesson may quote, but a model lesson that
// repeats the code of an error whose text holds it ("404: …") stays at
// the prior of one task, below the injection gate.
func TestEvidencePriorErrorCode(t *testing.T) {
	task := newTrace("t-code").
		ok("find_customer", `{"email":"ann.lee@example.com"}`, `{"customer_id":"cus_8842"}`).
		fail("create_invoice", `{"customer_id":"cust-ann"}`, "404: customer cust-ann not found", "404").
		ok("create_invoice", `{"customer_id":"cus_8842"}`, `{"invoice":"in_5521"}`).build()
	in := hindsight.Experience{
		Tool: "create_invoice", Situation: "create_invoice failed with 404", Origin: "llm:m", Confidence: 0.95, SourceSteps: []int{0, 1, 2},
		Lesson: "Before create_invoice, take customer_id from the result of find_customer; a guessed customer_id fails with 404.",
	}
	kept, drops := (&Validator{}).Validate(task, []hindsight.Experience{in})
	if len(kept) != 1 {
		t.Fatalf("dropped: %+v", drops)
	}
	if kept[0].Confidence != singlePrior {
		t.Errorf("confidence %v, want %v: the error names neither customer_id nor find_customer", kept[0].Confidence, singlePrior)
	}
}
