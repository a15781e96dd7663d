package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/tasktest"
)

// TestShowTaskStreams: GET /v1/tasks/{id}, written step by step, answers
// the very bytes the daemon wrote when it built the whole task (writeJSON
// of traces.Store.Task), for tasks of one chunk, of many chunks (steps with
// HTML characters and invalid UTF-8 among them), and for a missing task;
// Client.StreamTask reads back the same task and steps.
func TestShowTaskStreams(t *testing.T) {
	s := &Server{}
	c := startServer(t, s)
	ctx := context.Background()
	var steps []hindsight.Step
	for i := range 250 {
		st := tasktest.Step("src", uint64(i+1), 0)
		st.ExplicitTask = "big"
		st.Arguments = json.RawMessage(fmt.Sprintf(`{"q":"<a&b> %d"}`, i))
		if i == 7 {
			st.ErrorCode, st.IsError, st.Result = "E<1>", true, json.RawMessage("{\"text\":\"bad \xff byte\"}")
		}
		steps = append(steps, st)
	}
	one := tasktest.Step("src2", 1, 0)
	one.ExplicitTask = "small"
	for i := 0; i < len(steps); i += 40 { // many batches: many chunks
		if _, err := c.Ingest(ctx, steps[i:min(i+40, len(steps))]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Ingest(ctx, []hindsight.Step{one}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"big", "small"} {
		task, err := s.Traces.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(task); err != nil {
			t.Fatal(err)
		}
		got := rawGet(t, c, "/tasks/"+id)
		if !bytes.Equal(got, validUTF8(want.Bytes())) {
			t.Errorf("%s: streamed answer differs from the built one:\n got %.300s\nwant %.300s", id, got, want.Bytes())
		}

		var head *hindsight.Task
		var streamed []hindsight.Step
		err = c.StreamTask(ctx, id, func(h *hindsight.Task) error { head = h; return nil },
			func(s *hindsight.Step) error { streamed = append(streamed, *s); return nil })
		if err != nil {
			t.Fatal(err)
		}
		whole, err := c.Task(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if head == nil || head.ID != id || head.StepCount != len(whole.Steps) || len(streamed) != len(whole.Steps) {
			t.Fatalf("%s: streamed head %+v and %d steps; whole task has %d", id, head, len(streamed), len(whole.Steps))
		}
		a, _ := json.Marshal(streamed)
		b, _ := json.Marshal(whole.Steps)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: streamed steps differ from the whole task's", id)
		}
	}
	err := c.StreamTask(ctx, "nope", func(*hindsight.Task) error { return nil }, func(*hindsight.Step) error { return nil })
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Errorf("missing task: %v, want a 404", err)
	}
}

// rawGet returns the body of GET path from the daemon.
func rawGet(t *testing.T, c *Client, path string) []byte {
	t.Helper()
	resp, err := c.do(context.Background(), http.MethodGet, path, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
