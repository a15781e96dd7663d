package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// TestAPIFinal: POST /v1/tasks/final by task and by session, with and
// without waiting for the reflection.
func TestAPIFinal(t *testing.T) {
	ctx := context.Background()
	q := &recordingQueue{}
	c := startServer(t, &Server{Queue: q, Tick: time.Hour, ReflectFallback: 10 * time.Millisecond})
	now := time.Now()
	s1 := tasktest.Stdio(tasktest.Step("a", 1, 0), "s1", 11)
	s1.StartedAt, s1.EndedAt = now, now
	s2 := tasktest.Explicit(tasktest.Step("b", 1, 0), "job-1")
	s2.StartedAt, s2.EndedAt = now, now
	if err := c.Deliver(ctx, []hindsight.Step{s1, s2}); err != nil {
		t.Fatal(err)
	}
	res, err := c.FinalTask(ctx, FinalRequest{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.WasFinal || !res.Queued || res.Reflection != "pending" || res.Waited || !slices.Contains(q.ids(), res.TaskID) {
		t.Fatalf("final by session = %+v (queue %v)", res, q.ids())
	}
	res, err = c.FinalTask(ctx, FinalRequest{TaskID: "job-1", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.TaskID != "job-1" || !res.Queued || !res.Waited || res.Error != "" {
		t.Fatalf("final by id, waiting = %+v", res)
	}
	for _, tc := range []struct {
		req  FinalRequest
		want error
	}{
		{FinalRequest{}, ErrRejected},
		{FinalRequest{TaskID: "a/b"}, ErrRejected},
		{FinalRequest{TaskID: "t-unknown"}, hindsight.ErrNotFound},
		{FinalRequest{SessionID: "s-unknown"}, hindsight.ErrNotFound},
	} {
		if _, err := c.FinalTask(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("FinalTask(%+v) = %v, want %v", tc.req, err, tc.want)
		}
	}
}

// TestAPIEpisodes: episodes are validated, redacted, indexed and stored
// once per task and index, as tools/call steps of their task.
func TestAPIEpisodes(t *testing.T) {
	ctx := context.Background()
	red, err := capture.NewRedactor(capture.RedactorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	c := startServer(t, &Server{Redactor: red, Tick: time.Hour})
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	secret := "ghp_" + strings.Repeat("a1B2c3D4e5", 4)[:36]
	eps := []Episode{
		{TaskID: "job-7", Action: "shell", Input: json.RawMessage(`{"cmd":"make test"}`), Observation: "FAIL: token " + secret, Failed: true, Timestamp: at},
		{TaskID: "job-7", Action: "edit_file", Input: json.RawMessage(`{"path":"a.go"}`), Observation: "ok", Timestamp: at.Add(time.Second)},
		{TaskID: "job-7", Action: "shell", Observation: "PASS"},
	}
	for i, e := range eps {
		res, err := c.StoreEpisode(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if res.StepIndex != i || res.Duplicate {
			t.Fatalf("episode %d: %+v", i, res)
		}
		if i == 0 && res.Redactions == 0 {
			t.Fatalf("episode 0 kept its secret: %+v", res)
		}
	}
	again := eps[1]
	again.StepIndex = new(1)
	if res, err := c.StoreEpisode(ctx, again); err != nil || !res.Duplicate || res.StepIndex != 1 {
		t.Fatalf("told again = %+v, %v", res, err)
	}
	task, err := c.Task(ctx, "job-7")
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Steps) != 3 || task.FailureCount != 1 {
		t.Fatalf("task = %d steps, %d failures", len(task.Steps), task.FailureCount)
	}
	s0 := task.Steps[0]
	if s0.Method != "tools/call" || s0.Tool != "shell" || !s0.IsError || s0.Transport != EpisodeTransport ||
		s0.Server != EpisodeServer || !s0.StartedAt.Equal(at) || string(s0.Arguments) != `{"cmd":"make test"}` {
		t.Fatalf("step 0 = %+v", s0)
	}
	if strings.Contains(string(s0.Result), secret) || !strings.Contains(string(s0.Result), `"isError":true`) {
		t.Fatalf("step 0 result = %s", s0.Result)
	}
	if string(task.Steps[2].Arguments) != `{}` {
		t.Fatalf("step 2 arguments = %s", task.Steps[2].Arguments)
	}

	bad := []struct {
		name string
		e    Episode
	}{
		{"no task", Episode{Action: "x"}},
		{"task with slash", Episode{TaskID: "a/b", Action: "x"}},
		{"long task", Episode{TaskID: strings.Repeat("t", MaxEpisodeTaskID+1), Action: "x"}},
		{"no action", Episode{TaskID: "t"}},
		{"action on two lines", Episode{TaskID: "t", Action: "a\nb"}},
		{"input not an object", Episode{TaskID: "t", Action: "x", Input: json.RawMessage(`[1]`)}},
		{"negative index", Episode{TaskID: "t", Action: "x", StepIndex: new(-1)}},
		{"huge observation", Episode{TaskID: "t", Action: "x", Observation: strings.Repeat("o", MaxEpisodeBytes+1)}},
	}
	for _, tc := range bad {
		if _, err := c.StoreEpisode(ctx, tc.e); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: err = %v, want ErrRejected", tc.name, err)
		}
	}

	// Without a configured redactor the built-in rules redact episodes.
	c2 := startServer(t, &Server{Tick: time.Hour})
	leaky := Episode{TaskID: "t-builtin", Action: "login", Input: json.RawMessage(`{"user":"ann","password":"hunter2-correct-horse"}`)}
	res, err := c2.StoreEpisode(ctx, leaky)
	if err != nil || res.Redactions == 0 {
		t.Fatalf("built-in redactor: %+v, %v", res, err)
	}
	task, err = c2.Task(ctx, "t-builtin")
	if err != nil || len(task.Steps) != 1 || strings.Contains(string(task.Steps[0].Arguments), "hunter2") {
		t.Fatalf("stored episode: %v %+v", err, task)
	}
}
