package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
	"github.com/hindsight-proxy/hindsight/reflect"
	"github.com/hindsight-proxy/hindsight/store/embedded"
	"github.com/hindsight-proxy/hindsight/store/embedder"
)

// reply is one scripted answer of the fake LLM endpoint.
type reply struct {
	status  int               // 0 means 200
	content string            // the assistant message's content
	refusal string            // the assistant message's refusal
	raw     string            // a whole body instead of a chat completion
	delay   time.Duration     // sleep before answering
	header  map[string]string // extra response headers
}

// fakeLLM is an OpenAI-compatible chat completions endpoint answering from
// a script; past its end it repeats the last reply.
type fakeLLM struct {
	*httptest.Server
	mu       sync.Mutex
	script   []reply
	requests []map[string]any
}

func newFakeLLM(t *testing.T, script ...reply) *fakeLLM {
	f := &fakeLLM{script: script}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var body map[string]any
	b, _ := io.ReadAll(r.Body)
	json.Unmarshal(b, &body)
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, body)
	rep := f.script[min(n, len(f.script)-1)]
	f.mu.Unlock()
	if rep.delay > 0 {
		select {
		case <-time.After(rep.delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.status != 0 && rep.status != http.StatusOK {
		w.WriteHeader(rep.status)
		fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"test","code":"scripted"}}`, rep.status)
		return
	}
	if rep.raw != "" {
		io.WriteString(w, rep.raw)
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.content}
	if rep.refusal != "" {
		msg["content"] = nil
		msg["refusal"] = rep.refusal
	}
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1700000000, "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": msg}},
		"usage":   map[string]any{"prompt_tokens": 500, "completion_tokens": 100, "total_tokens": 600},
	})
}

func (f *fakeLLM) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// harness is a queue over real Badger with the LLM reflector pointed at a
// fake endpoint, the real capture redactor and an in-memory store.
type harness struct {
	llm     *fakeLLM
	queue   *reflect.Queue
	store   *embedded.Store
	metrics *reflect.Metrics
	logs    *testkit.SyncBuffer
	tasks   tasktest.Map
}

func newHarness(t *testing.T, cfg Config, script ...reply) *harness {
	t.Helper()
	h := &harness{llm: newFakeLLM(t, script...), store: openStore(t), metrics: reflect.NewMetrics(), logs: &testkit.SyncBuffer{}}
	logger := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.BaseURL = h.llm.URL + "/v1"
	cfg.APIKey = "test-key"
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	if cfg.MaxRetryDelay == 0 {
		cfg.MaxRetryDelay = 50 * time.Millisecond
	}
	red, err := capture.NewRedactor(capture.RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger, cfg.Metrics, cfg.Redactor = logger, h.metrics, reflect.RedactorFunc(red.RedactString)
	llm, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.tasks = tasktest.Map{}
	task := tasktest.Load(t, filepath.Join("..", "testdata", "rules", "login_401.trace.json"))
	h.tasks[task.ID] = task
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p := &reflect.Pipeline{
		Reflector: llm,
		Validator: &reflect.Validator{Redactor: reflect.RedactorFunc(red.RedactString), Metrics: h.metrics, Logger: logger},
		Merger:    &reflect.Merger{Store: h.store, Embedder: h.store.Embedder(), Metrics: h.metrics, Logger: logger},
		Logger:    logger,
	}
	h.queue = reflect.NewQueue(db, h.tasks, p)
	h.queue.Metrics, h.queue.Logger, h.queue.MaxAttempts = h.metrics, logger, 2
	return h
}

// run enqueues the login task and reflects on it once.
func (h *harness) run(t *testing.T) (*reflect.Entry, error) {
	t.Helper()
	ctx := context.Background()
	if err := h.queue.Enqueue(ctx, "task-login"); err != nil {
		t.Fatal(err)
	}
	err := h.queue.RunNow(ctx, nil, true, nil)
	e, qerr := h.queue.Entry(ctx, "task-login")
	if qerr != nil {
		t.Fatal(qerr)
	}
	return e, err
}

func answer(exps ...string) string { return `{"experiences":[` + strings.Join(exps, ",") + `]}` }

const goodExp = `{"situation":"list_orders returns 401 Unauthorized when called before login","action":"called login, then list_orders again","result":"list_orders succeeded","lesson":"Call login before list_orders; without a session list_orders fails with 401.","confidence":0.9,"source_steps":[2,3,4],"tool":"list_orders","error_code":"401","task_type":"shopping"}`

func expWith(field string, value any) string {
	var m map[string]any
	json.Unmarshal([]byte(goodExp), &m)
	m[field] = value
	b, _ := json.Marshal(m)
	return string(b)
}

func TestLLMGoodExperience(t *testing.T) {
	h := newHarness(t, Config{Temperature: 0.9}, reply{content: answer(goodExp)})
	e, err := h.run(t)
	if err != nil || e.State != reflect.StateDone {
		t.Fatalf("state %s, err %v", e.State, err)
	}
	all := all(t, h.store)
	if len(all) != 1 {
		t.Fatalf("%d experiences stored, want 1", len(all))
	}
	got := all[0]
	if got.Tool != "list_orders" || got.Server != "shop" || got.ErrorCode != "401" || got.SourceTask != "task-login" ||
		!slices.Equal(got.SourceSteps, []int{2, 3, 4}) || got.TaskType != "shopping" || got.EvidenceCount != 1 || got.Version != 1 {
		t.Errorf("stored %+v", got)
	}
	if len(e.Experiences) != 1 || e.Experiences[0] != got.ID {
		t.Errorf("entry experiences %v, want [%s]", e.Experiences, got.ID)
	}
	req := h.llm.requests[0]
	if temp, _ := req["temperature"].(float64); temp > MaxTemperature {
		t.Errorf("temperature %v sent, want at most %v", temp, MaxTemperature)
	}
	rf, _ := req["response_format"].(map[string]any)
	if rf["type"] != "json_schema" {
		t.Errorf("response_format %v, want json_schema", rf)
	}
	if req["model"] != "test-model" {
		t.Errorf("model %v", req["model"])
	}
	msgs, _ := json.Marshal(req["messages"])
	for _, want := range []string{`#2 [failure] shop/list_orders`, `error_code=401`, `#4 [recovery]`, `"system"`} {
		if !strings.Contains(string(msgs), want) {
			t.Errorf("prompt lacks %q:\n%s", want, msgs)
		}
	}
	if strings.Contains(string(msgs), "initialize") {
		t.Errorf("prompt renders non-tool steps:\n%s", msgs)
	}
	calls, tokens := h.queue.Pipeline.Reflector.(*Reflector).Budget().Used()
	if calls != 1 || tokens != 600 {
		t.Errorf("budget used %d calls %d tokens, want 1 and 600", calls, tokens)
	}
}

// TestLLMDrops scripts answers that validation must refuse, alone or beside
// a good experience, and checks what was stored and counted.
func TestLLMDrops(t *testing.T) {
	cases := []struct {
		name   string
		answer string
		stored int
		reason string
	}{
		{"invented step", answer(goodExp, expWith("source_steps", []int{2, 17})), 1, reflect.DropInventedStep},
		{"only invented", answer(expWith("source_steps", []int{42})), 0, reflect.DropInventedStep},
		{"low confidence", answer(expWith("confidence", 0.3)), 0, reflect.DropLowConfidence},
		{"vague advice", answer(expWith("lesson", "Be careful and double-check your inputs before calling tools.")), 0, reflect.DropVague},
		{"tool not in steps", answer(expWith("tool", "cancel_order")), 0, reflect.DropToolMismatch},
		{"nothing to learn", answer(), 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Config{}, reply{content: c.answer})
			e, err := h.run(t)
			if err != nil || e.State != reflect.StateDone {
				t.Fatalf("state %s, err %v: a dropped candidate is not a failed task", e.State, err)
			}
			all := all(t, h.store)
			if len(all) != c.stored {
				t.Fatalf("%d stored, want %d: %+v", len(all), c.stored, all)
			}
			for _, x := range all {
				for _, s := range x.SourceSteps {
					if s > 4 {
						t.Errorf("stored experience cites step %d", s)
					}
				}
			}
			if c.reason != "" {
				if got := h.metrics.Dropped()[c.reason]; got != 1 {
					t.Errorf("dropped[%s] = %d, want 1 (all: %v)", c.reason, got, h.metrics.Dropped())
				}
				st, _ := h.queue.Stats(context.Background())
				if st.Dropped[c.reason] != 1 {
					t.Errorf("stats dropped %v", st.Dropped)
				}
			}
		})
	}
}

// TestLLMSecretEchoed: a model's lesson built on a token it saw is
// refused as advice that needs a credential (not stored redacted), and
// the secret reaches neither the store nor the log.
func TestLLMSecretEchoed(t *testing.T) {
	const secret = "ghp_Zx81kq0LmN3vB7cR2tY5wP9sD4fG6hJ1kL0a"
	h := newHarness(t, Config{}, reply{content: answer(
		expWith("lesson", "Call login before list_orders, then pass token "+secret+" as the session; without it list_orders fails with 401."),
		strings.Replace(expWith("lesson", "Low confidence, dropped, logged: token "+secret+" for list_orders."), `"confidence":0.9`, `"confidence":0.2`, 1),
	)})
	if e, err := h.run(t); err != nil || e.State != reflect.StateDone {
		t.Fatalf("state %s, err %v", e.State, err)
	}
	if all := all(t, h.store); len(all) != 0 {
		t.Fatalf("stored %+v, want the lesson on a token refused", all)
	}
	if got := h.metrics.Dropped()[reflect.DropCredential]; got != 1 {
		t.Errorf("dropped[credential] = %d (all: %v)", got, h.metrics.Dropped())
	}
	if !strings.Contains(h.logs.String(), "Low confidence, dropped") {
		t.Errorf("the dropped candidate was not logged:\n%s", h.logs.String())
	}
	if strings.Contains(h.logs.String(), secret) {
		t.Fatalf("secret reached the log")
	}
}

// TestLLMFaults scripts answers that hold no experiences to read: the task
// stays pending after the first attempt, is marked failed after the second
// (MaxAttempts 2), and nothing is stored.
func TestLLMFaults(t *testing.T) {
	cases := []struct {
		name  string
		reply reply
		log   string
	}{
		{"malformed json", reply{content: `{"experiences": [{"lesson": "Call login`}, "unreadable model answer"},
		{"prose only", reply{content: "I could not find anything useful in this task."}, "unreadable model answer"},
		{"empty answer", reply{content: "  "}, "empty content"},
		{"refusal", reply{refusal: "I can't help with that."}, "model refused"},
		{"wrong types", reply{content: `{"experiences": "none"}`}, "unreadable model answer"},
		{"list of strings", reply{content: `{"experiences": ["call login first"]}`}, "unreadable model answer"},
		{"no choices", reply{raw: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[]}`}, "no choices"},
		{"not json at all", reply{raw: `<html>bad gateway</html>`}, "model request failed"},
		{"bad request", reply{status: 400}, "model request failed"},
		{"secret in prose", reply{content: "Use ghp_Zx81kq0LmN3vB7cR2tY5wP9sD4fG6hJ1kL0a and retry."}, "unreadable model answer"},
		{"secret in refusal", reply{refusal: "I won't use ghp_Zx81kq0LmN3vB7cR2tY5wP9sD4fG6hJ1kL0a."}, "model refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxRetries: -1}, c.reply)
			e, err := h.run(t)
			if err == nil || e.State != reflect.StatePending || e.Attempts != 1 || e.LastError == "" || e.NextAttempt.IsZero() {
				t.Fatalf("after one try: %+v, err %v", e, err)
			}
			if err := h.queue.RunNow(context.Background(), nil, true, nil); err == nil {
				t.Fatal("second try succeeded")
			}
			e, _ = h.queue.Entry(context.Background(), "task-login")
			if e.State != reflect.StateFailed || e.Attempts != 2 {
				t.Fatalf("after two tries: %+v", e)
			}
			if n := len(all(t, h.store)); n != 0 {
				t.Errorf("%d experiences stored", n)
			}
			e, _ = h.queue.Entry(context.Background(), "task-login")
			if strings.Contains(h.logs.String(), "ghp_Zx81") || strings.Contains(e.LastError, "ghp_Zx81") {
				t.Errorf("secret in the log or the queue entry:\n%s\n%s", h.logs.String(), e.LastError)
			}
			if !strings.Contains(h.logs.String(), c.log) {
				t.Errorf("log lacks %q:\n%s", c.log, h.logs.String())
			}
			st, _ := h.queue.Stats(context.Background())
			if st.Failed != 1 || st.Pending != 0 || st.LastError == "" {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestLLMRetries checks the endpoint's transient faults are retried within
// one reflection and the experience is stored.
func TestLLMRetries(t *testing.T) {
	good := reply{content: answer(goodExp)}
	cases := []struct {
		name     string
		script   []reply
		requests int
	}{
		{"429 then success", []reply{{status: 429, header: map[string]string{"retry-after-ms": "20"}}, good}, 2},
		{"503 twice then success", []reply{{status: 503}, {status: 503}, good}, 3},
		{"timeout then success", []reply{{delay: 2 * time.Second, content: answer(goodExp)}, good}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Config{RequestTimeout: 300 * time.Millisecond}, c.script...)
			e, err := h.run(t)
			if err != nil || e.State != reflect.StateDone {
				t.Fatalf("state %s, err %v", e.State, err)
			}
			if n := h.llm.count(); n != c.requests {
				t.Errorf("%d requests, want %d", n, c.requests)
			}
			if n := len(all(t, h.store)); n != 1 {
				t.Errorf("%d stored, want 1", n)
			}
			calls, _ := h.queue.Pipeline.Reflector.(*Reflector).Budget().Used()
			if calls != c.requests {
				t.Errorf("budget counted %d calls, want %d", calls, c.requests)
			}
		})
	}
}

func TestLLMTimeoutKeepsPending(t *testing.T) {
	h := newHarness(t, Config{RequestTimeout: 100 * time.Millisecond, TimeoutRetries: -1}, reply{delay: 5 * time.Second})
	e, err := h.run(t)
	if !errors.Is(err, context.DeadlineExceeded) || e.State != reflect.StatePending || e.Attempts != 1 {
		t.Fatalf("entry %+v, err %v", e, err)
	}
	if !strings.Contains(h.logs.String(), "kind=timeout") {
		t.Errorf("no timeout log line:\n%s", h.logs.String())
	}
}

func TestLLMHourlyCap(t *testing.T) {
	h := newHarness(t, Config{CallsPerHour: 1}, reply{content: answer(goodExp)})
	second := *h.tasks["task-login"]
	second.ID = "task-login-2"
	h.tasks[second.ID] = &second
	ctx := context.Background()
	h.queue.Enqueue(ctx, "task-login")
	h.queue.Enqueue(ctx, second.ID)
	err := h.queue.RunNow(ctx, nil, true, nil)
	if !errors.Is(err, reflect.ErrBudget) {
		t.Fatalf("err %v, want reflect.ErrBudget", err)
	}
	if h.llm.count() != 1 {
		t.Errorf("%d requests, want 1", h.llm.count())
	}
	st, _ := h.queue.Stats(ctx)
	if st.Done != 1 || st.Pending != 1 || st.Retrying != 0 {
		t.Errorf("stats %+v: the capped task must wait without a failed attempt", st)
	}
}

func TestLLMSkipsRoutineSuccess(t *testing.T) {
	h := newHarness(t, Config{}, reply{content: answer(goodExp)})
	ok := tasktest.Load(t, filepath.Join("..", "testdata", "rules", "all_success.trace.json"))
	h.tasks[ok.ID] = ok
	if err := h.queue.RunNow(context.Background(), []string{ok.ID}, false, nil); err != nil {
		t.Fatal(err)
	}
	if h.llm.count() != 0 || len(all(t, h.store)) != 0 {
		t.Errorf("%d requests, %d stored for a task without failures", h.llm.count(), len(all(t, h.store)))
	}
}

// TestLLMSchemaFallback: an endpoint that rejects response_format gets the
// same prompt without it, and the tolerant parser reads the fenced answer.
func TestLLMSchemaFallback(t *testing.T) {
	h := newHarness(t, Config{MaxRetries: -1},
		reply{status: 400, raw: ""},
		reply{content: "Here are the lessons:\n```json\n[" + goodExp + "]\n```"})
	h.llm.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte("response_format")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"response_format json_schema is not supported","type":"invalid_request_error","param":"response_format"}}`)
			return
		}
		h.llm.mu.Lock()
		h.llm.script = h.llm.script[1:]
		h.llm.mu.Unlock()
		h.llm.serve(w, r)
	})
	e, err := h.run(t)
	if err != nil || e.State != reflect.StateDone || len(all(t, h.store)) != 1 {
		t.Fatalf("state %s, err %v, stored %d", e.State, err, len(all(t, h.store)))
	}
}

// openStore opens an embedded experience store in a fresh directory.
func openStore(t *testing.T) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedder.NewLocal(0), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// all lists every experience in st, superseded and deleted ones too.
func all(t *testing.T, st *embedded.Store) []hindsight.Experience {
	t.Helper()
	out, err := st.List(context.Background(), hindsight.ListOptions{IncludeSuperseded: true, IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
