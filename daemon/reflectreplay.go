package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ReflectReplayRequest is the body of POST /v1/reflect/replay: reflection
// run again over stored final tasks.
type ReflectReplayRequest struct {
	TaskIDs []string   `json:"task_ids,omitempty"` // these tasks; none: every final task
	Since   *time.Time `json:"since,omitempty"`    // only tasks ended at or after
	// Reflector is "rules" or "llm"; "" is the daemon's own.
	Reflector string `json:"reflector,omitempty"`
	Model     string `json:"model,omitempty"`  // the LLM's model, in place of the configured one
	Prompt    string `json:"prompt,omitempty"` // the LLM's prompt template file (absolute path), in place of the configured one
	// DryRun plans without changing the experience store.
	DryRun bool `json:"dry_run,omitempty"`
}

// PlannedChange is one change a reflection replay makes (or would make)
// to the experience store.
type PlannedChange struct {
	Task string `json:"task"`
	// Outcome is "added", "reinforced" (merged into a near-duplicate),
	// "superseded" (a contradicted lesson replaced) or "stale".
	Outcome    string `json:"outcome"`
	ID         string `json:"id,omitempty"`         // the experience added or reinforced (a dry run's new ids are provisional)
	Superseded string `json:"superseded,omitempty"` // the experience it supersedes
	Tool       string `json:"tool,omitempty"`
	Lesson     string `json:"lesson,omitempty"`
}

// ReflectPlan is what a reflection replay did or would do.
type ReflectPlan struct {
	DryRun     bool            `json:"dry_run"`
	Tasks      int             `json:"tasks"`
	Candidates int             `json:"candidates"`
	Dropped    int             `json:"dropped"` // candidates validation refused
	Changes    []PlannedChange `json:"changes"`
	// Left are the live experiences the replay leaves as they are.
	Left   []string `json:"left"`
	Failed []string `json:"failed,omitempty"` // tasks whose reflection failed, with the error
}

// ReflectReplayProgress is one line of the answer to POST
// /v1/reflect/replay: progress lines, then one with Finished and the plan
// (or the error).
type ReflectReplayProgress struct {
	Done     int          `json:"done"`
	Total    int          `json:"total"`
	Finished bool         `json:"finished,omitempty"`
	Error    string       `json:"error,omitempty"`
	Plan     *ReflectPlan `json:"plan,omitempty"`
}

// ReflectReplayer is implemented by a ReflectionQueue that can run
// reflection again over stored tasks.
type ReflectReplayer interface {
	ReplayReflection(ctx context.Context, req ReflectReplayRequest, tasks []string, progress func(done, total int)) (*ReflectPlan, error)
}

func (s *Server) handleReflectReplay(w http.ResponseWriter, r *http.Request) {
	var req ReflectReplayRequest
	if err := decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	rr, ok := s.Queue.(ReflectReplayer)
	if !ok {
		s.fail(w, r, fmt.Errorf("replay reflection: %w: the daemon has no reflection", ErrUnavailable))
		return
	}
	ids := req.TaskIDs
	if len(ids) == 0 {
		final := true
		tasks, err := s.Traces.Tasks(r.Context(), TaskFilter{Final: &final})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for i := len(tasks) - 1; i >= 0; i-- { // oldest first
			if req.Since == nil || !tasks[i].EndedAt.Before(*req.Since) {
				ids = append(ids, tasks[i].ID)
			}
		}
	} else if err := s.knownTasks(r.Context(), ids); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	var mu sync.Mutex
	send := func(p ReflectReplayProgress) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(p)
		if flusher != nil {
			flusher.Flush()
		}
	}
	plan, err := rr.ReplayReflection(r.Context(), req, ids, func(done, total int) {
		send(ReflectReplayProgress{Done: done, Total: total})
	})
	fin := ReflectReplayProgress{Finished: true, Done: len(ids), Total: len(ids), Plan: plan}
	if err != nil {
		fin.Error = err.Error()
	}
	send(fin)
}

// ReflectReplay runs reflection again over stored final tasks (see
// ReflectReplayRequest), reporting progress, and returns the plan: what
// changed, or with DryRun what would change.
func (c *Client) ReflectReplay(ctx context.Context, req ReflectReplayRequest, progress func(done, total int)) (*ReflectPlan, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodPost, "/reflect/replay", nil, bytes.NewReader(b), "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var p ReflectReplayProgress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("decode reflect progress: %w", err)
		}
		if p.Finished {
			if p.Error != "" {
				return p.Plan, fmt.Errorf("replay reflection: %s", p.Error)
			}
			return p.Plan, nil
		}
		if progress != nil {
			progress(p.Done, p.Total)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read reflect progress: %w", err)
	}
	return nil, errors.New("replay reflection: the daemon ended the answer early")
}
