package memserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/mark3labs/mcp-go/mcp"
)

// fakeDaemon answers from memory.
type fakeDaemon struct {
	mu       sync.Mutex
	episodes []daemon.Episode
	tasks    []hindsight.Task
	found    []hindsight.ScoredExperience
	down     bool
	noStore  bool // the daemon answers that its experience store is unreachable
}

var errDown = errors.New("connection refused")

func (f *fakeDaemon) StoreEpisode(ctx context.Context, e daemon.Episode) (*daemon.EpisodeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errDown
	}
	f.episodes = append(f.episodes, e)
	return &daemon.EpisodeResult{TaskID: e.TaskID, StepIndex: len(f.episodes) - 1}, nil
}

func (f *fakeDaemon) FinalTask(ctx context.Context, req daemon.FinalRequest) (*daemon.FinalResult, error) {
	if req.TaskID == "t-none" {
		return nil, &daemon.APIError{Status: 404, Message: "task t-none: not found"}
	}
	return &daemon.FinalResult{TaskID: req.TaskID, Queued: true, Reflection: "done", Waited: req.Wait,
		Experiences: []hindsight.Experience{{ID: "x1", Tool: "deploy", Lesson: "run tests first", Confidence: 0.5, SourceSteps: []int{0, 2}}}}, nil
}

func (f *fakeDaemon) Tasks(ctx context.Context, flt daemon.TaskFilter) ([]hindsight.Task, error) {
	var out []hindsight.Task
	for _, t := range f.tasks {
		if flt.Final == nil || t.Final == *flt.Final {
			out = append(out, t)
		}
	}
	if flt.Limit > 0 && len(out) > flt.Limit {
		out = out[:flt.Limit]
	}
	return out, nil
}

func (f *fakeDaemon) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	for _, t := range f.tasks {
		if t.ID == id {
			return &t, nil
		}
	}
	return nil, &daemon.APIError{Status: 404, Message: "not found"}
}

func (f *fakeDaemon) Search(ctx context.Context, q hindsight.Query) ([]hindsight.ScoredExperience, error) {
	if f.noStore {
		// As daemon.Client returns the daemon's 503.
		return nil, &daemon.APIError{Status: 503, Message: "search experiences: store at http://10.0.0.7:8080: " + hindsight.ErrStoreUnavailable.Error()}
	}
	return f.found, nil
}

func call(t *testing.T, s *Server, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	var h func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	for _, d := range s.tools() {
		if d.tool.Name == name {
			h = d.handler
		}
	}
	if h == nil {
		t.Fatalf("no tool %s", name)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := h(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// checkSchema validates a successful result against its tool's output
// schema.
func checkSchema(t *testing.T, s *Server, name string, res *mcp.CallToolResult) {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: %s", name, text(res))
	}
	var raw json.RawMessage
	for _, d := range s.tools() {
		if d.tool.Name == name {
			raw = d.tool.RawOutputSchema
		}
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatal(err)
	}
	r, err := sch.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var inst any
	_ = json.Unmarshal(b, &inst)
	if err := r.Validate(inst); err != nil {
		t.Fatalf("%s: %s: %v", name, b, err)
	}
	if text(res) == "" {
		t.Fatalf("%s: no text", name)
	}
}

func TestToolsAnswerWithinSchemas(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	result, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": "PASS"}}})
	d := &fakeDaemon{
		tasks: []hindsight.Task{
			{ID: "a", Final: false, StartedAt: at.Add(3 * time.Hour), Steps: []hindsight.Step{
				{StepIndex: 0, Method: "tools/call", Tool: "shell", Transport: daemon.EpisodeTransport, Server: "agent", Arguments: json.RawMessage(`{"cmd":"go test"}`), Result: result, CausalTag: "success", StartedAt: at},
				{StepIndex: 1, Method: "initialize", Server: "fs", Arguments: json.RawMessage(`{"protocolVersion":"x"}`), StartedAt: at},
				{StepIndex: 2, Method: "tools/call", Tool: "read", Server: "fs", Error: &hindsight.RPCError{Code: -32602, Message: "bad path"}, StartedAt: at},
			}},
			{ID: "b", Final: true, Reflection: "pending", StartedAt: at.Add(2 * time.Hour)},
			{ID: "c", Final: true, Reflection: "done", StartedAt: at.Add(time.Hour)},
			{ID: "d", Final: true, Reflection: "failed", StartedAt: at},
		},
		found: []hindsight.ScoredExperience{{Experience: hindsight.Experience{ID: "x1", Tool: "deploy", Lesson: "Run the tests before deploy.", Confidence: 0.7, EvidenceCount: 2}, Score: 1}},
	}
	s := New(Options{Daemon: d, Logger: nil})

	res := call(t, s, ToolStoreEpisode, map[string]any{"task_id": "a", "action": "shell", "observation": "ok", "timestamp": "2026-12-01T10:00:00Z", "input": map[string]any{"cmd": "ls"}})
	checkSchema(t, s, ToolStoreEpisode, res)
	if e := d.episodes[0]; !e.Timestamp.Equal(at) || string(e.Input) != `{"cmd":"ls"}` {
		t.Fatalf("episode sent = %+v", e)
	}

	res = call(t, s, ToolQueryEpisodes, map[string]any{"task_id": "a", "limit": 2})
	checkSchema(t, s, ToolQueryEpisodes, res)
	var page QueryEpisodesResult
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &page)
	if page.Total != 3 || len(page.Steps) != 2 || page.NextOffset == nil || *page.NextOffset != 2 ||
		page.Steps[0].Kind != "episode" || page.Steps[0].Observation != "PASS" || page.Steps[1].Kind != "mcp" {
		t.Fatalf("page 1 = %s", b)
	}
	res = call(t, s, ToolQueryEpisodes, map[string]any{"task_id": "a", "offset": 2})
	checkSchema(t, s, ToolQueryEpisodes, res)
	b, _ = json.Marshal(res.StructuredContent)
	page = QueryEpisodesResult{}
	_ = json.Unmarshal(b, &page)
	if len(page.Steps) != 1 || page.NextOffset != nil || page.Steps[0].Observation != "bad path" || !page.Steps[0].IsError {
		t.Fatalf("page 2 = %s", b)
	}

	res = call(t, s, ToolTriggerHindsight, map[string]any{"task_id": "a", "wait": true})
	checkSchema(t, s, ToolTriggerHindsight, res)

	for _, name := range []string{ToolQueryHindsight, ToolQuerySemantic} {
		res = call(t, s, name, map[string]any{"situation": "deploying", "query_text": "deploying"})
		checkSchema(t, s, name, res)
		if !strings.Contains(text(res), "Run the tests before deploy.") || !strings.HasPrefix(text(res), "[Hindsight]") {
			t.Fatalf("%s = %q", name, text(res))
		}
	}
	d.found = nil
	res = call(t, s, ToolQueryHindsight, map[string]any{"situation": "deploying"})
	checkSchema(t, s, ToolQueryHindsight, res)
	if text(res) != "[Hindsight] No relevant past experience; decide from the current context." {
		t.Fatalf("empty answer = %q", text(res))
	}

	for _, tc := range []struct {
		status string
		want   string
	}{
		{"", "a b c d"}, {"any", "a b c d"}, {"open", "a"}, {"final", "b"}, {"reflected", "c"}, {"failed", "d"},
	} {
		res = call(t, s, ToolListTasks, map[string]any{"status": tc.status})
		checkSchema(t, s, ToolListTasks, res)
		var l ListTasksResult
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &l)
		var ids []string
		for _, t := range l.Tasks {
			ids = append(ids, t.ID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("list_tasks %q = %q, want %q", tc.status, got, tc.want)
		}
	}
}

func TestToolErrors(t *testing.T) {
	d := &fakeDaemon{}
	s := New(Options{Daemon: d})
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{ToolStoreEpisode, map[string]any{"task_id": "a", "action": "x", "observation": "", "timestamp": "noon"}, "timestamp"},
		{ToolStoreEpisode, map[string]any{"task_id": "a", "action": "x", "step_index": "one"}, "bad arguments"},
		{ToolQueryEpisodes, map[string]any{}, "task_id"},
		{ToolQueryEpisodes, map[string]any{"task_id": "a", "limit": 1000}, "limit"},
		{ToolQueryEpisodes, map[string]any{"task_id": "zz"}, "not found"},
		{ToolTriggerHindsight, map[string]any{}, "task_id"},
		{ToolTriggerHindsight, map[string]any{"task_id": "t-none"}, "not found"},
		{ToolListTasks, map[string]any{"status": "asleep"}, "status"},
		{ToolListTasks, map[string]any{"limit": -1}, "limit"},
		{ToolQueryHindsight, map[string]any{"situation": "x", "top_k": -2}, "top_k"},
	} {
		res := call(t, s, tc.tool, tc.args)
		if !res.IsError || !strings.Contains(text(res), tc.want) {
			t.Errorf("%s %v = %v %q, want an error about %q", tc.tool, tc.args, res.IsError, text(res), tc.want)
		}
	}
	d.noStore = true
	if res := call(t, s, ToolQueryHindsight, map[string]any{"situation": "deploying"}); res.IsError ||
		text(res) != inject.StoreUnavailableText {
		t.Errorf("store down: %v %q, want %q", res.IsError, text(res), inject.StoreUnavailableText)
	}
	d.down = true
	if res := call(t, s, ToolStoreEpisode, map[string]any{"task_id": "a", "action": "x", "observation": ""}); !res.IsError || !strings.Contains(text(res), "did not answer") {
		t.Errorf("daemon down: %q", text(res))
	}
}

// TestWritesAreRateLimited: a session's writes beyond its budget are
// refused; reads are not limited.
func TestWritesAreRateLimited(t *testing.T) {
	d := &fakeDaemon{}
	s := New(Options{Daemon: d, WritesPerMinute: 1, WriteBurst: 3})
	args := map[string]any{"task_id": "a", "action": "x", "observation": ""}
	for i := range 3 {
		if res := call(t, s, ToolStoreEpisode, args); res.IsError {
			t.Fatalf("write %d refused: %s", i, text(res))
		}
	}
	if res := call(t, s, ToolStoreEpisode, args); !res.IsError || !strings.Contains(text(res), "rate limited") {
		t.Fatalf("write 4 = %q, want rate limited", text(res))
	}
	if res := call(t, s, ToolTriggerHindsight, map[string]any{"task_id": "a"}); !res.IsError || !strings.Contains(text(res), "rate limited") {
		t.Fatalf("trigger = %q, want rate limited", text(res))
	}
	if res := call(t, s, ToolListTasks, nil); res.IsError {
		t.Fatalf("a read was limited: %q", text(res))
	}
	if len(d.episodes) != 3 {
		t.Fatalf("%d episodes reached the daemon, want 3", len(d.episodes))
	}
	unlimited := New(Options{Daemon: &fakeDaemon{}, WritesPerMinute: -1})
	for range 100 {
		if res := call(t, unlimited, ToolStoreEpisode, args); res.IsError {
			t.Fatalf("unlimited: %q", text(res))
		}
	}
}
