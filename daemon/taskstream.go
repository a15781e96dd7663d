package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/hindsight-proxy/hindsight"
)

// handleTask answers GET /v1/tasks/{id}: the task with its steps, the JSON
// of a hindsight.Task, written step by step as the store reads them (a
// task of 100k steps is over 100 MB of JSON, which the daemon never
// holds). A failure after the first byte breaks the stream, so the client
// sees a truncated answer, not a complete one.
func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	sw := taskStreamWriter{w: w}
	err := s.Traces.StreamTask(r.Context(), r.PathValue("id"), sw.head, func(st *hindsight.Step) error {
		s.annotate(st)
		return sw.step(st)
	})
	if err == nil {
		err = sw.end()
	}
	if err != nil && !sw.started {
		s.fail(w, r, err)
		return
	}
	if err != nil {
		s.Logger.Error("show task", "task", r.PathValue("id"), "err", err)
		panic(http.ErrAbortHandler)
	}
}

// taskStreamWriter writes a task as json.Encoder (HTML left unescaped)
// would, its steps one at a time: steps is the task's last field.
type taskStreamWriter struct {
	w       http.ResponseWriter
	buf     bytes.Buffer
	enc     *json.Encoder
	header  []byte // the task without steps, its closing "}\n" cut
	started bool   // the status line is written
	steps   int
}

func (t *taskStreamWriter) head(task *hindsight.Task) error {
	t.enc = json.NewEncoder(&t.buf)
	t.enc.SetEscapeHTML(false)
	task.Steps = nil
	if err := t.enc.Encode(task); err != nil {
		return fmt.Errorf("encode task: %w", err)
	}
	t.header = bytes.TrimSuffix(bytes.Clone(t.buf.Bytes()), []byte("}\n"))
	t.w.Header().Set("Content-Type", "application/json")
	t.w.WriteHeader(http.StatusOK)
	t.started = true
	return nil
}

func (t *taskStreamWriter) step(st *hindsight.Step) error {
	t.buf.Reset()
	if t.steps == 0 {
		t.buf.Write(t.header)
		t.buf.WriteString(`,"steps":[`)
	} else {
		t.buf.WriteByte(',')
	}
	t.steps++
	if err := t.enc.Encode(st); err != nil {
		return fmt.Errorf("encode step: %w", err)
	}
	t.buf.Truncate(t.buf.Len() - 1) // the Encoder's newline
	_, err := t.w.Write(validUTF8(t.buf.Bytes()))
	return err
}

func (t *taskStreamWriter) end() error {
	var err error
	if t.steps == 0 {
		_, err = t.w.Write(validUTF8(append(t.header, "}\n"...)))
	} else {
		_, err = t.w.Write([]byte("]}\n"))
	}
	return err
}

// StreamTask reads the task id from the daemon without holding its steps:
// head is called with the task (Steps nil), then step with each step in
// step order. A missing task is an *APIError with status 404.
func (c *Client) StreamTask(ctx context.Context, id string, head func(*hindsight.Task) error, step func(*hindsight.Step) error) error {
	resp, err := c.do(ctx, http.MethodGet, "/tasks/"+url.PathEscape(id), nil, nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := decodeTaskStream(json.NewDecoder(resp.Body), head, step); err != nil {
		return fmt.Errorf("read task %s: %w", id, err)
	}
	return nil
}

// decodeTaskStream reads a task object from dec, calling head once with
// every field but steps (which come last), and step with each step.
func decodeTaskStream(dec *json.Decoder, head func(*hindsight.Task) error, step func(*hindsight.Step) error) error {
	if err := wantDelim(dec, '{'); err != nil {
		return err
	}
	fields := []byte{'{'}
	headDone := false
	callHead := func() error {
		headDone = true
		var task hindsight.Task
		if err := json.Unmarshal(append(fields, '}'), &task); err != nil {
			return err
		}
		task.Steps = nil
		return head(&task)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if name != "steps" {
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return err
			}
			if headDone {
				continue // after the steps: not a field the daemon writes
			}
			if len(fields) > 1 {
				fields = append(fields, ',')
			}
			k, _ := json.Marshal(name)
			fields = append(append(append(fields, k...), ':'), v...)
			continue
		}
		if err := callHead(); err != nil {
			return err
		}
		if err := wantDelim(dec, '['); err != nil {
			return err
		}
		for dec.More() {
			var s hindsight.Step
			if err := dec.Decode(&s); err != nil {
				return err
			}
			if err := step(&s); err != nil {
				return err
			}
		}
		if err := wantDelim(dec, ']'); err != nil {
			return err
		}
	}
	if err := wantDelim(dec, '}'); err != nil {
		return err
	}
	if !headDone {
		return callHead()
	}
	return nil
}

func wantDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return errors.New("unexpected " + fmt.Sprint(tok) + ", want " + d.String())
	}
	return nil
}
