package e2e

import (
	"cmp"
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSidecarNamespace runs two sidecars of one server on the embedded
// store, one started with `--namespace team` and one without: the lesson
// each one's task teaches lands in its namespace (team, default), and each
// sidecar's query_hindsight shows only its own namespace's lesson.
func TestSidecarNamespace(t *testing.T) {
	t.Setenv("HINDSIGHT_LLM_MODEL", "") // rule-based reflection
	exe := testbin.HindsightFull(t)
	home, client := daemonHome(t, exe, 2*time.Minute)
	dir := string(home)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	learn := []toolCall{
		{"fetch_report", map[string]any{"month": "2026-03"}},
		{"login", map[string]any{"user": "ada", "password": "correct-horse-battery"}},
		{"fetch_report", map[string]any{"month": "2026-03"}},
	}
	sides := map[string]string{"team": "ns-team", "": "ns-plain"} // --namespace → task
	for ns, task := range sides {
		session(ctx, t, exe, dir, ns, task, learn)
		final(ctx, t, client, task, 3)
		reflectTask(ctx, t, exe, dir, task)
	}
	list, out := listExperiences(ctx, t, exe, dir)
	want := map[string]string{"ns-team": "team", "ns-plain": hindsight.DefaultNamespace} // task → namespace
	idIn := map[string]string{}                                                          // namespace → lesson
	for _, e := range list {
		if want[e.SourceTask] != e.Namespace {
			t.Errorf("the lesson of task %s is in namespace %q, want %q", e.SourceTask, e.Namespace, want[e.SourceTask])
		}
		idIn[e.Namespace] = e.ID
	}
	if len(list) != 2 || len(idIn) != 2 {
		t.Fatalf("want one lesson in each namespace, got:\n%s", out)
	}

	ask := []toolCall{{"query_hindsight", map[string]any{"situation": "fetch_report answered 401 Unauthorized", "tool_name": "fetch_report"}}}
	for ns, task := range map[string]string{"team": "ask-team", "": "ask-plain"} {
		session(ctx, t, exe, dir, ns, task, ask)
		tk := final(ctx, t, client, task, 1)
		var shown []string
		for _, s := range tk.Steps {
			for _, in := range s.Injected {
				shown = append(shown, in.ExperienceIDs...)
			}
		}
		own := idIn[cmp.Or(ns, hindsight.DefaultNamespace)]
		if !slices.Contains(shown, own) || len(slices.Compact(slices.Sorted(slices.Values(shown)))) != 1 {
			t.Errorf("sidecar with --namespace %q showed %v, want only its namespace's lesson %s", ns, shown, own)
		}
	}
}

// toolCall is one tools/call an agent session makes.
type toolCall struct {
	tool string
	args map[string]any
}

// session runs one agent session through `hindsight wrap` (with
// --namespace ns unless "") in front of the example server, as task.
func session(ctx context.Context, t *testing.T, exe, dir, ns, task string, calls []toolCall) {
	t.Helper()
	var extra []string
	if ns != "" {
		extra = []string{"--namespace", ns}
	}
	cs := wrapExample(ctx, t, exe, dir, task, extra...)
	defer cs.Close()
	for _, c := range calls {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
	}
}

// final waits until task is final with at least n steps and returns it.
func final(ctx context.Context, t *testing.T, client *daemon.Client, task string, n int) *hindsight.Task {
	t.Helper()
	for {
		tk, err := client.Task(ctx, task)
		if err == nil && tk.Final && len(tk.Steps) >= n {
			return tk
		}
		if ctx.Err() != nil {
			t.Fatalf("task %s never final: %+v %v", task, tk, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// wrapExample connects an MCP client, as task, to `hindsight wrap --name
// example [extra…] -- exe example-server` with its home in dir.
func wrapExample(ctx context.Context, t *testing.T, exe, dir, task string, extra ...string) *mcp.ClientSession {
	t.Helper()
	args := append([]string{"wrap", "--name", "example"}, extra...)
	cmd := exec.Command(exe, append(args, "--", exe, "example-server")...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+dir, "HINDSIGHT_TASK_ID="+task)
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}
