// Package reflect turns finished tasks into experiences: specific, true to
// the trace and useful next time. It runs in the daemon, off the agent's
// path.
//
// A Queue keeps the tasks waiting for reflection in the daemon's Badger
// database and works them off in the background. Each task goes through a
// Pipeline: a Reflector proposes experiences (LLM, backed by any
// OpenAI-compatible endpoint, or Rules, deterministic and offline), a
// Validator drops what the trace does not support, and a Merger folds the
// rest into the ExperienceStore, reinforcing near-duplicates and
// superseding contradicted lessons.
//
// The package name shadows the standard library's reflect; import that one
// as stdreflect where both are needed.
package reflect

import (
	"context"

	"github.com/hindsight-proxy/hindsight"
)

// A Reflector proposes experiences for a finished task. The experiences it
// returns are candidates: the Validator decides what is kept. A task with
// nothing worth keeping yields no experiences and no error.
type Reflector interface {
	Reflect(ctx context.Context, task *hindsight.Task) ([]hindsight.Experience, error)
}

// TaskSource loads a task with its steps. The daemon's trace store
// implements it. Task returns an error wrapping hindsight.ErrNotFound for an
// unknown id.
type TaskSource interface {
	Task(ctx context.Context, id string) (*hindsight.Task, error)
}

// Redactor removes secrets from text and reports how many it replaced. The
// capture package's redactor satisfies it through a small adapter.
type Redactor interface {
	Redact(s string) (string, int)
}

// RedactorFunc adapts a function to the Redactor interface.
type RedactorFunc func(s string) (string, int)

// Redact calls f(s).
func (f RedactorFunc) Redact(s string) (string, int) { return f(s) }

// ToolCalls returns the steps of t that are tools/call requests to a real
// server, in step order.
func ToolCalls(t *hindsight.Task) []*hindsight.Step {
	var out []*hindsight.Step
	for i := range t.Steps {
		s := &t.Steps[i]
		if s.Method != "tools/call" || s.Local || s.Direction == hindsight.ServerToClient || s.Tool == "" {
			continue
		}
		out = append(out, s)
	}
	return out
}
