package spool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// An End is the end of a session or of a task that a sidecar could not tell
// the daemon (it was down or starting), noted in its outbox so that it
// travels with the steps: whoever delivers the outbox (the sidecar, or the
// drainer of a dead sidecar's outbox) delivers its ends after its steps.
type End struct {
	// SessionID is the session that ended, or whose task ended (Final
	// without TaskID).
	SessionID string `json:"session_id,omitempty"`
	// TaskID is the task the agent ended (Final).
	TaskID string `json:"task_id,omitempty"`
	// Final says the agent ended the task; otherwise the session closed.
	Final bool `json:"final,omitempty"`
	// LastSeq is the seq of the outbox's last step when the end came: the
	// daemon counts a closed session closed once that step has arrived.
	LastSeq uint64 `json:"last_seq"`
}

// An Ender is a Deliverer that also takes ends (End), from the outbox
// source. An end whose steps never arrived (refused, expired) is
// acknowledged, not returned as an error.
type Ender interface {
	DeliverEnd(ctx context.Context, source string, e End) error
}

// endsName is the file of an outbox's undelivered ends, one End in JSON a
// line.
const endsName = "ends.jsonl"

// endsMu serializes the writers of ends files in this process.
var endsMu sync.Mutex

// NoteEnd adds e to the outbox's ends, on disk (synced) before it
// returns. The delivery loop does not send ends: DeliverEnds does, and
// the drainer of the outbox once the sidecar is gone (DrainOrphans),
// after its steps. An outbox holding ends is kept at Close.
func (o *Spool) NoteEnd(e End) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("note end: %w", err)
	}
	endsMu.Lock()
	defer endsMu.Unlock()
	f, err := os.OpenFile(filepath.Join(o.dir, endsName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("note end: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("note end: %w", err)
	}
	return nil
}

// DeliverEnds delivers the outbox's noted ends through its Deliverer (when
// it is an Ender), in the order they were noted, and forgets those
// delivered.
func (o *Spool) DeliverEnds(ctx context.Context) error {
	return deliverEnds(ctx, o.dir, o.id, o.opts.Deliverer)
}

// hasEnds reports whether the outbox in dir holds undelivered ends.
func hasEnds(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, endsName))
	return err == nil && fi.Size() > 0
}

// deliverEnds delivers the ends of the outbox in dir (id) to d, stopping
// at the first error; the ends left are written back.
func deliverEnds(ctx context.Context, dir, id string, d Deliverer) error {
	en, ok := d.(Ender)
	if !ok {
		return nil
	}
	endsMu.Lock()
	defer endsMu.Unlock()
	path := filepath.Join(dir, endsName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ends: %w", err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	for i, line := range lines {
		var e End
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &e) != nil {
			continue // a line cut by a crash
		}
		if err := en.DeliverEnd(ctx, id, e); err != nil {
			if werr := writeEnds(path, bytes.Join(lines[i:], nil)); werr != nil {
				return fmt.Errorf("deliver ends: %w (and %w)", err, werr)
			}
			return fmt.Errorf("deliver ends: %w", err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("deliver ends: %w", err)
	}
	return nil
}

// writeEnds replaces the ends file at path with b, atomically.
func writeEnds(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
