package llm

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/reflect"
)

// invoiceTrace is a task of a billing server: the agent looked the
// customer up, guessed the customer id, and then used the one it found.
const invoiceTrace = `{
  "id": "task-invoice", "final": true, "servers": ["billing"],
  "started_at": "2026-02-01T10:00:00Z", "ended_at": "2026-02-01T10:00:09Z",
  "steps": [
    {"task_id": "task-invoice", "server": "billing", "step_index": 0, "method": "tools/call", "tool": "find_customer", "arguments": {"email": "ann.lee@example.com"},
     "result": {"content": [{"type": "text", "text": "{\"customer_id\": \"cus_8842\", \"name\": \"Ann Lee\"}"}]}, "causal_tag": "success", "direction": "client", "client_name": "claude-code"},
    {"task_id": "task-invoice", "server": "billing", "step_index": 1, "method": "tools/call", "tool": "create_invoice", "arguments": {"customer_id": "cust-ann", "amount": 120},
     "result": {"content": [{"type": "text", "text": "404: customer cust-ann not found"}], "isError": true},
     "is_error": true, "error_code": "404", "causal_tag": "failure", "direction": "client", "client_name": "claude-code"},
    {"task_id": "task-invoice", "server": "billing", "step_index": 2, "method": "tools/call", "tool": "create_invoice", "arguments": {"customer_id": "cus_8842", "amount": 120},
     "result": {"content": [{"type": "text", "text": "{\"invoice\": \"in_5521\"}"}]}, "causal_tag": "recovery", "direction": "client", "client_name": "claude-code"}
  ]
}`

// TestLLMOneOffDropped: the model's lesson quotes the task's customer id,
// with real citations and a confidence of 0.95. It is dropped as a one-off
// and nothing with the id is stored; the clean lesson of the same answer is
// stored, marked as the model's, at the confidence one task supports.
func TestLLMOneOffDropped(t *testing.T) {
	const leaky = `{"situation":"create_invoice returns 404 for customer cust-ann","action":"used the id from find_customer","result":"create_invoice succeeded","lesson":"Call create_invoice with customer_id \"cus_8842\"; the guessed id is rejected with 404.","confidence":0.95,"source_steps":[0,1,2],"tool":"create_invoice","error_code":"404"}`
	const clean = `{"situation":"create_invoice returns 404 customer not found for a guessed customer_id","action":"looked the customer up with find_customer and passed the customer_id it returned","result":"create_invoice succeeded","lesson":"Before create_invoice, take customer_id from the result of find_customer; a guessed customer_id is not found.","confidence":0.95,"source_steps":[0,1,2],"tool":"create_invoice","error_code":"404"}`
	f := newFakeLLM(t, reply{content: answer(leaky, clean)})
	metrics := reflect.NewMetrics()
	logs := &testkit.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	llm, err := New(Config{BaseURL: f.URL + "/v1", APIKey: "test-key", Model: "m-test", Logger: logger, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	p := &reflect.Pipeline{
		Reflector: llm,
		Validator: &reflect.Validator{Metrics: metrics, Logger: logger},
		Merger:    &reflect.Merger{Store: st, Embedder: st.Embedder(), Metrics: metrics, Logger: logger},
		Logger:    logger,
	}
	var task hindsight.Task
	if err := json.Unmarshal([]byte(invoiceTrace), &task); err != nil {
		t.Fatal(err)
	}
	task.StepCount = len(task.Steps)
	if vals := reflect.TaskValues(&task); !vals["cus_8842"] || !vals["cust-ann"] {
		t.Fatalf("the customer ids are not task values: %v", vals)
	}
	out, err := p.Process(context.Background(), &task)
	if err != nil {
		t.Fatal(err)
	}
	if f.count() != 1 {
		t.Fatalf("%d model requests, want 1", f.count())
	}
	if out.Candidates != 2 || len(out.Dropped) != 1 || out.Dropped[0].Reason != reflect.DropOneOff || len(out.Merged) != 1 {
		t.Fatalf("outcome %+v, want 2 candidates, 1 dropped as %s, 1 merged", out, reflect.DropOneOff)
	}
	if d := out.Dropped[0]; !strings.Contains(d.Detail, "cus_8842") && !strings.Contains(d.Detail, "cust-ann") {
		t.Errorf("drop detail %q names neither id", d.Detail)
	}
	if metrics.Dropped()[reflect.DropOneOff] != 1 {
		t.Errorf("dropped counters %v", metrics.Dropped())
	}
	stored := all(t, st)
	if len(stored) != 1 {
		t.Fatalf("%d stored, want 1: %+v", len(stored), stored)
	}
	b, _ := json.Marshal(stored)
	for _, v := range []string{"cus_8842", "cust-ann", "ann.lee@example.com", "in_5521"} {
		if strings.Contains(string(b), v) {
			t.Errorf("the store holds %q: %s", v, b)
		}
	}
	got := stored[0]
	if got.Origin != "llm:m-test" || !strings.Contains(got.Lesson, "take customer_id from the result of find_customer") {
		t.Errorf("stored origin %q lesson %q", got.Origin, got.Lesson)
	}
	if got.Confidence != reflect.Confidence(1, 0, false) || got.EvidenceCount != 1 || got.SourceTask != "task-invoice" || got.Server != "billing" {
		t.Errorf("stored confidence %v evidence %d task %q server %q, want %v, 1, task-invoice, billing",
			got.Confidence, got.EvidenceCount, got.SourceTask, got.Server, reflect.Confidence(1, 0, false))
	}
	if got.ErrorTemplate == "" || strings.Contains(got.ErrorTemplate, "cust-ann") {
		t.Errorf("stored template %q", got.ErrorTemplate)
	}
	if !strings.Contains(logs.String(), reflect.DropOneOff) {
		t.Errorf("the drop was not logged:\n%s", logs.String())
	}
}
