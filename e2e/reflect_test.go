package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEndToEnd runs the real programs: agent traffic through `hindsight
// wrap` to `hindsight example-server`, the session ends, the task becomes
// final, `hindsight reflect` runs the reflection in the daemon, and
// `hindsight experiences list --json` shows the lesson with the steps it
// cites. The reflection is rule-based, then by an LLM: a scripted
// OpenAI-compatible endpoint configured through HINDSIGHT_LLM_*.
func TestEndToEnd(t *testing.T) {
	t.Run("rules", func(t *testing.T) {
		t.Setenv("HINDSIGHT_LLM_MODEL", "") // rule-based, whatever the machine has
		e := endToEnd(t)
		if !strings.Contains(e.Lesson, "login before fetch_report") {
			t.Errorf("lesson %q", e.Lesson)
		}
	})
	t.Run("llm", func(t *testing.T) {
		const lesson = "Call login before fetch_report; without a session fetch_report answers 401."
		var calls atomic.Int32
		stepRE := regexp.MustCompile(`#(\d+) \[`)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			b, _ := io.ReadAll(r.Body)
			var steps []int
			for _, m := range stepRE.FindAllStringSubmatch(string(b), -1) {
				n, _ := strconv.Atoi(m[1])
				steps = append(steps, n)
			}
			exp, _ := json.Marshal(map[string]any{"experiences": []any{map[string]any{
				"situation": "fetch_report answers 401 Unauthorized before login", "action": "called login", "result": "fetch_report worked",
				"lesson": lesson, "confidence": 0.9, "source_steps": steps, "tool": "fetch_report", "error_code": "", "task_type": "billing"}}})
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "created": 1, "model": "test-model",
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": string(exp)}}},
				"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})
		}))
		defer srv.Close()
		t.Setenv("HINDSIGHT_LLM_BASE_URL", srv.URL+"/v1")
		t.Setenv("HINDSIGHT_LLM_MODEL", "test-model")
		t.Setenv("HINDSIGHT_LLM_API_KEY", "test-key")
		e := endToEnd(t)
		if e.Lesson != lesson || e.TaskType != "billing" || calls.Load() == 0 {
			t.Errorf("lesson %q task type %q after %d model calls", e.Lesson, e.TaskType, calls.Load())
		}
	})
}

// endToEnd drives one task through the programs and returns the one
// experience listed afterwards.
func endToEnd(t *testing.T) hindsight.Experience {
	exe := testbin.HindsightFull(t) // the daemon with an LLM is hindsightd
	home, client := daemonHome(t, exe, 2*time.Minute)
	dir := string(home)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const task = "e2e-reflect"
	cs := wrapExample(ctx, t, exe, dir, task)
	calls := []struct {
		tool    string
		args    map[string]any
		isError bool
	}{
		{"fetch_report", map[string]any{"month": "2026-03"}, true}, // 401: no session
		{"login", map[string]any{"user": "ada", "password": "correct-horse-battery"}, false},
		{"fetch_report", map[string]any{"month": "2026-03"}, false},
	}
	for _, c := range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		if res.IsError != c.isError {
			t.Fatalf("%s: isError %v, want %v", c.tool, res.IsError, c.isError)
		}
	}
	cs.Close()

	// The session closed: the task becomes final once its steps arrived.
	var tk *hindsight.Task
	var err error
	for {
		tk, err = client.Task(ctx, task)
		if err == nil && tk.Final && len(tk.Steps) >= 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("task never final: %+v %v", tk, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var fetch []int
	for _, s := range tk.Steps {
		if s.Tool == "fetch_report" || s.Tool == "login" {
			fetch = append(fetch, s.StepIndex)
		}
	}
	reflectTask(ctx, t, exe, dir, task)
	list, out := listExperiences(ctx, t, exe, dir)
	if len(list) != 1 {
		t.Fatalf("%d experiences, want 1:\n%s", len(list), out)
	}
	e := list[0]
	if e.Tool != "fetch_report" || e.SourceTask != task || !strings.Contains(e.ErrorCode, "401") {
		t.Errorf("experience %+v", e)
	}
	if !slices.Equal(e.SourceSteps, fetch) {
		t.Errorf("source steps %v, want the steps of the failure, login and recovery %v", e.SourceSteps, fetch)
	}
	if e.Version != 1 || e.EvidenceCount != 1 {
		t.Errorf("version %d, evidence %d: reflecting the same task again must change nothing", e.Version, e.EvidenceCount)
	}
	if strings.Contains(string(out), "correct-horse-battery") {
		t.Error("the password reached the experience store")
	}
	tk, err = client.Task(ctx, task)
	if err != nil || tk.Reflection != "done" {
		t.Errorf("task reflection state %q, want done (%v)", tk.Reflection, err)
	}
	return e
}

// reflectTask runs `hindsight reflect --task task` in home dir.
func reflectTask(ctx context.Context, t *testing.T, exe, dir, task string) {
	t.Helper()
	if out, err := exec.CommandContext(ctx, exe, "--home", dir, "reflect", "--task", task, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("hindsight reflect: %v\n%s", err, out)
	}
}

// listExperiences runs `hindsight experiences list --json` in home dir and
// returns the experiences and the output they were read from.
func listExperiences(ctx context.Context, t *testing.T, exe, dir string) ([]hindsight.Experience, []byte) {
	t.Helper()
	out, err := exec.CommandContext(ctx, exe, "--home", dir, "experiences", "list", "--json").Output()
	if err != nil {
		t.Fatalf("experiences list: %v", err)
	}
	var list []hindsight.Experience
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("experiences list --json: %v\n%s", err, out)
	}
	return list, out
}
