package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/reflect"
)

// ReflectOptions configure ReflectAgain.
type ReflectOptions struct {
	// Pipeline is the reflection to run: the daemon's, or a copy with
	// another Reflector. It is not changed.
	Pipeline *reflect.Pipeline
	// Templates, when set, gives failed steps the error templates the
	// miner knows (without learning them again: the tasks were learned
	// when they were first reflected).
	Templates *reflect.Templates
	Tasks     reflect.TaskSource
	// DryRun merges into an Overlay of the pipeline's store: the plan is
	// what applying would do, and the store is left as it was.
	DryRun   bool
	Progress func(done, total int)
}

// ReflectAgain runs reflection over the tasks ids again, in order, through
// the pipeline's validation and merge, and returns what it changed in the
// experience store, or with DryRun what it would change. Every task goes
// through Pipeline.Process; hits and counter-evidence are not counted
// again (Credit is not called). A task whose reflection fails is listed
// in the plan's Failed and the others go on.
func ReflectAgain(ctx context.Context, ids []string, opt ReflectOptions) (*daemon.ReflectPlan, error) {
	if opt.Pipeline == nil || opt.Pipeline.Merger == nil || opt.Pipeline.Merger.Store == nil {
		return nil, errors.New("replay reflection: no pipeline with a store")
	}
	p := *opt.Pipeline
	m := *p.Merger
	p.Merger = &m
	p.Templates = nil // annotated below, not learned again
	if opt.DryRun {
		m.Store = NewOverlay(m.Store)
		m.Metrics = nil
		if p.Validator != nil {
			v := *p.Validator
			v.Metrics = nil
			p.Validator = &v
		}
	}
	ns := m.Namespace
	if ns == "" {
		ns = hindsight.DefaultNamespace
	}
	before, err := m.Store.List(ctx, hindsight.ListOptions{Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("replay reflection: list experiences: %w", err)
	}
	plan := &daemon.ReflectPlan{DryRun: opt.DryRun, Changes: []daemon.PlannedChange{}, Left: []string{}}
	touched := map[string]bool{}
	if opt.Progress != nil {
		opt.Progress(0, len(ids))
	}
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return plan, err
		}
		task, err := opt.Tasks.Task(ctx, id)
		if err != nil {
			return plan, fmt.Errorf("replay reflection: load task %s: %w", id, err)
		}
		if opt.Templates != nil {
			opt.Templates.Annotate(task)
		}
		out, err := p.Process(ctx, task)
		plan.Tasks++
		if out != nil {
			plan.Candidates += out.Candidates
			plan.Dropped += len(out.Dropped)
			for _, r := range out.Merged {
				c := daemon.PlannedChange{Task: id, Outcome: r.Outcome, ID: r.ID, Superseded: r.Superseded}
				if e, err := m.Store.Get(ctx, ns, r.ID); err == nil {
					c.Tool, c.Lesson = e.Tool, e.Lesson
				}
				touched[r.ID] = true
				if r.Superseded != "" {
					touched[r.Superseded] = true
				}
				plan.Changes = append(plan.Changes, c)
			}
		}
		if err != nil {
			if errors.Is(err, reflect.ErrBudget) || ctx.Err() != nil {
				return plan, fmt.Errorf("replay reflection: %w", err)
			}
			plan.Failed = append(plan.Failed, id+": "+err.Error())
		}
		if opt.Progress != nil {
			opt.Progress(i+1, len(ids))
		}
	}
	for _, e := range before {
		if !touched[e.ID] {
			plan.Left = append(plan.Left, e.ID)
		}
	}
	sort.Strings(plan.Left)
	return plan, nil
}
