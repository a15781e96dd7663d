package traces

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/hindsight-proxy/hindsight"
)

// DefaultReflectSteps bounds the steps reflection reads of one task.
const DefaultReflectSteps = 2000

// ReflectionSource gives reflection the tasks of a trace store, reading at
// most MaxSteps steps of each, so that a task of 100k steps costs
// reflection a few MB, not hundreds. A task within the bound is read
// whole. Of a longer one reflection sees, in step order and with their
// own step indices (which lessons cite): the first quarter of the bound,
// every failed step with the afterFailure steps that follow it (where a
// recovery shows) while room lasts, and the last quarter. The task's
// StepCount and FailureCount stay the stored ones; the steps left out are
// logged.
type ReflectionSource struct {
	Traces   *Store
	MaxSteps int          // 0: DefaultReflectSteps
	Logger   *slog.Logger // nil: slog.Default()
}

// afterFailure is how many steps after a failure a capped read keeps.
const afterFailure = 3

// Task returns task id with at most MaxSteps of its steps.
func (r ReflectionSource) Task(ctx context.Context, id string) (*hindsight.Task, error) {
	max := r.MaxSteps
	if max <= 0 {
		max = DefaultReflectSteps
	}
	var task hindsight.Task
	w := stepWindow{head: max / 4, tail: max / 4, max: max}
	err := r.Traces.StreamTask(ctx, id, func(t *hindsight.Task) error {
		task = *t
		return nil
	}, w.add)
	if err != nil {
		return nil, err
	}
	task.Steps = w.steps()
	if w.seen > len(task.Steps) {
		log := r.Logger
		if log == nil {
			log = slog.Default()
		}
		failed := 0
		for i := range task.Steps {
			if task.Steps[i].Failed() {
				failed++
			}
		}
		log.Info("reflect: long task read in part", "task", id, "steps", w.seen, "read", len(task.Steps),
			"failures", task.FailureCount, "failures_read", failed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read task %s: %w", id, err)
	}
	return &task, nil
}

// stepWindow keeps a bounded selection of a task's steps as they stream
// by (see ReflectionSource).
type stepWindow struct {
	head, tail, max int

	kept   []hindsight.Step // head, then failures and what follows them
	ring   []hindsight.Step // the latest steps not kept, at most tail
	ringAt int              // where the next goes in ring once full
	follow int              // steps still to keep after a failure
	seen   int
}

func (w *stepWindow) add(s *hindsight.Step) error {
	w.seen++
	room := len(w.kept) < w.max-w.tail
	if len(w.kept) < w.head || (room && (s.Failed() || w.follow > 0)) {
		w.kept = append(w.kept, *s)
		if s.Failed() {
			w.follow = afterFailure
		} else if w.follow > 0 {
			w.follow--
		}
		return nil
	}
	w.follow = 0
	if len(w.ring) < w.tail {
		w.ring = append(w.ring, *s)
	} else if w.tail > 0 {
		w.ring[w.ringAt] = *s
		w.ringAt = (w.ringAt + 1) % w.tail
	}
	return nil
}

// steps returns what was kept, in step order.
func (w *stepWindow) steps() []hindsight.Step {
	out := append(w.kept, w.ring...)
	slices.SortFunc(out, func(a, b hindsight.Step) int { return cmp.Compare(a.StepIndex, b.StepIndex) })
	return out
}
