package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/hindsight-proxy/hindsight"
)

// handleTasks lists tasks, newest first, without their steps (GET
// /v1/tasks): ?final=true or false keeps only final or open ones, ?limit=
// caps their number.
func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request) {
	var f TaskFilter
	q := r.URL.Query()
	if v := q.Get("final"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, r, badRequest("final: %v", err))
			return
		}
		f.Final = &b
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, r, badRequest("limit: not a count: %q", v))
			return
		}
		f.Limit = n
	}
	tasks, err := s.Traces.Tasks(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if tasks == nil {
		tasks = []hindsight.Task{}
	}
	writeJSON(w, http.StatusOK, tasks)
}

// StepAnnotator is implemented by a ReflectionQueue that derives fields
// of a step on read: the error template of a failed call.
type StepAnnotator interface {
	AnnotateStep(s *hindsight.Step)
}

// annotate fills what the reflection queue derives for st, if it can.
func (s *Server) annotate(st *hindsight.Step) {
	if a, ok := s.Queue.(StepAnnotator); ok && st.Method == "tools/call" {
		a.AnnotateStep(st)
	}
}

// knownTasks returns nil when the trace store holds every task of ids,
// else the error (hindsight.ErrNotFound for an unknown one) of the first
// it cannot read.
func (s *Server) knownTasks(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if _, err := s.Traces.TaskInfo(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// handleExport streams the steps of the tasks named by ?task=, or of all
// tasks, as JSON lines (GET /v1/export); an unknown task is 404.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["task"]
	if err := s.knownTasks(r.Context(), ids); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := s.Traces.Steps(r.Context(), ids, func(st *hindsight.Step) error {
		s.annotate(st)
		buf.Reset()
		if err := enc.Encode(st); err != nil {
			return err
		}
		_, err := w.Write(validUTF8(buf.Bytes()))
		return err
	})
	if err != nil {
		// The status line is gone: break the stream so the client sees
		// a truncated export, not a complete one.
		s.Logger.Error("export steps", "err", err)
		panic(http.ErrAbortHandler)
	}
}
