package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/hindsight-proxy/hindsight/traces"
)

// FinalRequest is the body of POST /v1/tasks/final: the agent says a task
// is finished. It names the task, or a session whose latest open task is
// meant (a sidecar that saw the `_meta["io.hindsight/final"]` flag on a
// request and knows no task id).
type FinalRequest struct {
	TaskID    string `json:"task_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// Wait makes the answer wait for the task's reflection and carry its
	// outcome; otherwise it answers once the task is handed to reflection.
	Wait bool `json:"wait,omitempty"`
}

// FinalResult is the answer to POST /v1/tasks/final.
type FinalResult struct {
	TaskID string `json:"task_id"`
	// WasFinal is set when the task was final already (idle, its sessions
	// closed, or said so before).
	WasFinal bool `json:"was_final"`
	// Queued is set when the task is in the reflection queue (or was
	// reflected); false when the daemon has no reflection.
	Queued bool `json:"queued"`
	// Reflection is the task's reflection state after the call: "",
	// "pending", "done" or "failed".
	Reflection string `json:"reflection"`
	// Waited is set when the answer waited for the reflection; then
	// Experiences are the lessons whose source task is this one (a lesson
	// merged into an older one is counted there, under its first task),
	// and Error says what made the reflection fail.
	Waited      bool                   `json:"waited"`
	Experiences []hindsight.Experience `json:"experiences,omitempty"`
	Error       string                 `json:"error,omitempty"`
}

// finalTask marks a task final for req, hands it to reflection, and with
// req.Wait reflects it before answering.
func (s *Server) finalTask(ctx context.Context, req FinalRequest) (*FinalResult, error) {
	id := req.TaskID
	switch {
	case id == "" && req.SessionID == "":
		return nil, badRequest("no task_id nor session_id")
	case id == "":
		var err error
		if id, err = s.Traces.TaskOfSession(ctx, req.SessionID); err != nil {
			return nil, err
		}
	case !traces.ValidID(id):
		return nil, badRequest("task_id %q is not a valid id", id)
	}
	wasFinal, err := s.Traces.MarkFinal(ctx, id)
	if err != nil {
		return nil, err
	}
	res := &FinalResult{TaskID: id, WasFinal: wasFinal}
	if !wasFinal {
		s.m.final.Inc()
		s.Logger.Info("task final", "task", id, "said_by", "agent")
	}
	s.enqueue(ctx)
	task, err := s.Traces.TaskInfo(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.Queue == nil {
		res.Reflection = task.Reflection
		return res, nil
	}
	unq, err := s.Traces.Unqueued(ctx)
	if err != nil {
		return nil, err
	}
	res.Queued = !slices.Contains(unq, id)
	res.Reflection = task.Reflection
	if !req.Wait || !res.Queued {
		return res, nil
	}
	res.Waited = true
	if res.Reflection, err = s.waitReflection(ctx, id); err != nil {
		res.Error = err.Error()
	}
	if s.Store != nil {
		if res.Experiences, err = s.mem.LearntFrom(ctx, hindsight.ListOptions{Namespace: s.namespace("")}, id); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// DefaultReflectFallback is how long a waiting POST /v1/tasks/final leaves
// a task to the reflection queue's worker before it reflects it itself.
const DefaultReflectFallback = 10 * time.Second

// waitReflection waits until task id is reflected ("done" or "failed")
// and returns its state. The queue's worker takes it first (reflecting it
// here as well would reflect it twice); when the worker has not finished
// it within ReflectFallback (a backlog, a retry pause), it is reflected
// now. ctx bounds the wait.
func (s *Server) waitReflection(ctx context.Context, id string) (string, error) {
	fallback := s.ReflectFallback
	if fallback <= 0 {
		fallback = DefaultReflectFallback
	}
	deadline := time.Now().Add(fallback)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		task, err := s.Traces.TaskInfo(ctx, id)
		if err != nil {
			return "", err
		}
		switch task.Reflection {
		case "done", "failed":
			return task.Reflection, nil
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return task.Reflection, fmt.Errorf("wait for reflection: %w", ctx.Err())
		case <-tick.C:
		}
	}
	err := s.Queue.RunNow(ctx, []string{id}, false, func(int, int) {})
	task, terr := s.Traces.TaskInfo(ctx, id)
	if terr != nil {
		return "", terr
	}
	return task.Reflection, err
}

func (s *Server) handleFinal(w http.ResponseWriter, r *http.Request) {
	var req FinalRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.finalTask(r.Context(), req)
	s.answer(w, r, res, err)
}

// FinalTask tells the daemon a task is finished (POST /v1/tasks/final):
// it is final at once and handed to reflection; with req.Wait the answer
// comes after the reflection, with its outcome.
func (c *Client) FinalTask(ctx context.Context, req FinalRequest) (*FinalResult, error) {
	var res FinalResult
	if err := c.call(ctx, http.MethodPost, "/tasks/final", nil, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ApplyEnd applies an end a sidecar noted in its outbox (spool.End) and
// the daemon finds while draining it, after its steps: the agent ended a
// task, or a session closed after its LastSeq step of outbox source. An
// end whose task never arrived is dropped.
func (s *Server) ApplyEnd(ctx context.Context, source string, e spool.End) error {
	if e.Final {
		_, err := s.finalTask(ctx, FinalRequest{TaskID: e.TaskID, SessionID: e.SessionID})
		if errors.Is(err, hindsight.ErrNotFound) {
			return nil
		}
		return err
	}
	var last *uint64
	if e.LastSeq > 0 {
		last = &e.LastSeq
	} else {
		source = ""
	}
	final, err := s.Traces.CloseSession(ctx, e.SessionID, source, last)
	if err != nil {
		return err
	}
	for _, id := range final {
		s.Logger.Info("task final", "task", id, "closed_session", e.SessionID, "from", "outbox")
	}
	s.m.final.Add(float64(len(final)))
	if len(final) > 0 {
		s.Kick()
	}
	return nil
}
