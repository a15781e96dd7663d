package sidecar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/tidwall/gjson"
)

// sessionCloseTimeout bounds telling the daemon that sessions ended.
const sessionCloseTimeout = 3 * time.Second

// finalDrainTimeout bounds the outbox's last delivery when the sidecar
// stops; what is left stays on disk for the next sidecar or the daemon.
const finalDrainTimeout = 3 * time.Second

// downCheckTimeout bounds asking the daemon whether it answers.
const downCheckTimeout = 500 * time.Millisecond

// endTaskTimeout bounds ending a task: delivering its steps, then telling
// the daemon (which may be starting).
const endTaskTimeout = 30 * time.Second

func (s *Sidecar) noteSession(ex *proxy.Exchange) {
	if ex.Session == nil || ex.Session.ID == "" {
		return
	}
	s.mu.Lock()
	if _, ok := s.sessions[ex.Session.ID]; !ok {
		s.sessions[ex.Session.ID] = false
	}
	s.mu.Unlock()
}

// EndSession tells the daemon that session id ended (an HTTP session
// deleted or expired); its task may then be final. When the daemon does
// not answer, the end is noted in the outbox, after the session's steps
// (spool.End), for whoever delivers them. Close does this for every
// session still open.
func (s *Sidecar) EndSession(ctx context.Context, id string) {
	s.mu.Lock()
	ended, seen := s.sessions[id]
	s.sessions[id] = true
	s.mu.Unlock()
	if ended || !seen {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sessionCloseTimeout)
	defer cancel()
	// The close names the last step recorded so far: the daemon waits for
	// it before it counts the session closed, so the task is not final
	// while its steps still sit in the outbox.
	var source string
	var last *uint64
	if s.recorder != nil {
		if err := s.recorder.Sync(ctx); err == nil {
			if n := s.recorder.Stats().Captured; n > 0 {
				source, last = s.recorder.Source(), new(uint64(n))
			}
		}
	}
	_, err := s.client.CloseSession(ctx, id, source, last)
	if err != nil && Unreachable(err) && s.recorder != nil {
		// The end travels with the steps: whoever delivers the outbox
		// tells the daemon.
		e := spool.End{SessionID: id, LastSeq: uint64(s.recorder.Stats().Captured)}
		if nerr := s.recorder.NoteEnd(e); nerr == nil {
			s.cfg.Logger.Info("daemon not reachable: the session's end waits in the outbox", "session", id)
			return
		}
	}
	if err != nil {
		// The task still ends by the idle gap.
		s.cfg.Logger.Warn("tell the daemon a session ended", "session", id, "err", err)
	}
}

// closeSessions ends every session this sidecar saw. It runs before
// capture's final drain: each close names the session's last step, which
// the daemon waits for, and a close the daemon does not hear is noted in
// the outbox, which the final drain then keeps.
func (s *Sidecar) closeSessions() {
	s.mu.Lock()
	var open []string
	for id, ended := range s.sessions {
		if !ended {
			open = append(open, id)
		}
	}
	s.mu.Unlock()
	for _, id := range open {
		s.EndSession(context.Background(), id)
	}
}

// drainTimeout bounds capture's final drain: finalDrainTimeout, or a moment
// when the daemon does not answer (the outbox keeps the steps for the
// next sidecar or the daemon).
func (s *Sidecar) drainTimeout() time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), downCheckTimeout)
	defer cancel()
	if _, err := s.client.Health(ctx); err != nil {
		return downCheckTimeout
	}
	return finalDrainTimeout
}

// finalMetaPath finds inject.FinalMetaKey in a request.
var finalMetaPath = "params._meta." + strings.ReplaceAll(inject.FinalMetaKey, ".", `\.`)

// saysFinal reports whether a request sets inject.FinalMetaKey to true.
// Most requests cannot hold the key (its name appears nowhere in them, nor
// a \u escape that could spell it), and those skip the parse.
func saysFinal(req []byte) bool {
	if !bytes.Contains(req, finalKeyName) && !bytes.Contains(req, []byte(`\u`)) {
		return false
	}
	return gjson.GetBytes(req, finalMetaPath).Type == gjson.True
}

// finalKeyName is a part of inject.FinalMetaKey that JSON can write only
// as it is or with \u escapes.
var finalKeyName = []byte("hindsight")

// taskMetaPath finds capture.TaskMetaKey in a request.
var taskMetaPath = "params._meta." + strings.ReplaceAll(capture.TaskMetaKey, ".", `\.`)

// noteFinal ends the task of an agent's request that carries
// _meta["io.hindsight/final"]: true, or that calls the sidecar's
// trigger_hindsight tool, in the background: once the
// exchange's step is delivered, the daemon makes its task (the one the
// request named, else the session's) final and reflects it. Failing that,
// the task still ends by the idle gap.
func (s *Sidecar) noteFinal(ex *proxy.Exchange) {
	if ex.Direction != hindsight.ClientToServer || ex.Session == nil {
		return
	}
	trigger := ex.Local && ex.Method == "tools/call" && gjson.GetBytes(ex.Request, "params.name").Str == inject.EndToolName
	if !trigger && !saysFinal(ex.Request) {
		return
	}
	req := daemon.FinalRequest{TaskID: ex.Session.TaskID, SessionID: ex.Session.ID}
	if t := gjson.GetBytes(ex.Request, taskMetaPath); t.Type == gjson.String && t.Str != "" {
		req.TaskID = t.Str
	}
	if t := gjson.GetBytes(ex.Request, "params.arguments.task_id"); trigger && t.Type == gjson.String && t.Str != "" {
		req.TaskID = t.Str
	}
	if req.TaskID != "" {
		// Stored steps carry the id redacted: so does their end.
		req.TaskID, req.SessionID = s.red.RedactName(req.TaskID), ""
	}
	s.ending.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), endTaskTimeout)
		defer cancel()
		if err := s.endTask(ctx, req); err != nil {
			s.cfg.Logger.Warn("end the task the agent said was finished; it ends by the idle gap", "task", req.TaskID, "session", req.SessionID, "err", err)
		}
	})
}

// endTask delivers what was recorded, then asks the daemon to end the
// task, again while it does not know the task yet or does not answer.
// When it gives up (ctx done, or the sidecar closing) on a daemon that
// does not answer, the end is noted in the outbox, to be told after its
// steps by whoever delivers them.
func (s *Sidecar) endTask(ctx context.Context, req daemon.FinalRequest) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		if err := s.recorder.Sync(ctx); err != nil {
			return fmt.Errorf("end task: %w", err)
		}
		res, err := s.client.FinalTask(ctx, req)
		if err == nil {
			s.cfg.Logger.Info("task ended by the agent", "task", res.TaskID, "queued", res.Queued)
			return nil
		}
		if !errors.Is(err, hindsight.ErrNotFound) && !Unreachable(err) {
			return fmt.Errorf("end task: %w", err)
		}
		closing := s.closing
		if !Unreachable(err) {
			closing = nil // its steps are on their way: wait for them
		}
		select {
		case <-ctx.Done():
		case <-closing:
		case <-time.After(wait):
			continue
		}
		if !Unreachable(err) {
			return fmt.Errorf("end task: %w", err)
		}
		e := spool.End{Final: true, TaskID: req.TaskID, SessionID: req.SessionID, LastSeq: uint64(s.recorder.Stats().Captured)}
		if nerr := s.recorder.NoteEnd(e); nerr != nil {
			return fmt.Errorf("end task: %w (and %w)", err, nerr)
		}
		s.cfg.Logger.Info("daemon not reachable: the task's end waits in the outbox", "task", req.TaskID, "session", req.SessionID)
		return nil
	}
}
