package reflect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/hindsight-proxy/hindsight"
)

// A Pipeline reflects on one task: its Reflector proposes experiences, the
// Validator drops what the trace does not support, and the Merger stores
// the rest.
type Pipeline struct {
	// Reflector proposes experiences: an *LLM, or Rules when no LLM is
	// configured.
	Reflector Reflector
	// CrossCheck, when set (Rules beside an LLM), adds its experiences
	// about failures the Reflector's accepted experiences do not cover, so
	// a recovery the model missed or garbled is still learned.
	CrossCheck Reflector
	Validator  *Validator
	Merger     *Merger
	Logger     *slog.Logger
	// Helped, when set, names the experiences that were shown during task
	// and helped it succeed (inject.Helped); their hit counts rise once the
	// task is reflected (Credit). nil: reflection counts no hits.
	Helped func(task *hindsight.Task) []string
	// Harmed, when set, names the experiences shown on an error result
	// after which the same tool failed with the same error anyway
	// (inject.Harmed); each counts one counter-example (Credit), which
	// lowers its confidence. nil: no counter-evidence is counted.
	Harmed func(task *hindsight.Task) []string
	// Templates, when set, learns the task's error templates before the
	// Reflector runs and gives its failed steps their ErrorTemplate.
	Templates *Templates
}

// Outcome is what reflecting on one task produced.
type Outcome struct {
	TaskID     string
	Candidates int
	Dropped    []Drop
	Merged     []MergeResult
}

// Process reflects on task and stores what survives validation. An error
// means nothing certain can be said about the task; it should be retried.
// Merging is idempotent for one task, so a retry after a partial merge does
// not count evidence twice.
func (p *Pipeline) Process(ctx context.Context, task *hindsight.Task) (*Outcome, error) {
	if p.Templates != nil {
		if err := p.Templates.Learn(task); err != nil {
			p.logger().Warn("reflect: error templates not saved", "task", task.ID, "err", err)
		}
	}
	cands, err := p.Reflector.Reflect(ctx, task)
	if err != nil {
		return nil, fmt.Errorf("reflect on task %s: %w", task.ID, err)
	}
	out := &Outcome{TaskID: task.ID, Candidates: len(cands)}
	kept, drops := p.Validator.Validate(task, cands)
	out.Dropped = drops
	if p.CrossCheck != nil {
		extra, err := p.CrossCheck.Reflect(ctx, task)
		if err != nil {
			return nil, fmt.Errorf("cross-check task %s: %w", task.ID, err)
		}
		extra = uncovered(extra, kept)
		out.Candidates += len(extra)
		more, drops := p.Validator.Validate(task, extra)
		kept = append(kept, more...)
		out.Dropped = append(out.Dropped, drops...)
	}
	if len(kept) > 0 {
		for i := range kept {
			kept[i].Namespace = p.Merger.namespaceIn(task, &kept[i])
		}
		res, err := p.Merger.Merge(ctx, task.EndedAt, kept)
		out.Merged = res
		if err != nil {
			return out, fmt.Errorf("store experiences of task %s: %w", task.ID, err)
		}
	}
	p.logger().Info("reflect: task done", "task", task.ID, "candidates", out.Candidates, "dropped", len(out.Dropped), "stored", len(out.Merged))
	return out, nil
}

// Credit counts what task says about stored experiences: a counter-example
// against each lesson it contradicts (shown on an error that then happened
// again, Harmed; or a precondition met and the error anyway), and a hit for
// each that helped it succeed (Helped).
//
// Credit raises the hit counts of the experiences that helped task
// succeed (Helped). The queue calls it once per task, after the first
// successful reflection, so re-reflecting a task does not count twice.
func (p *Pipeline) Credit(ctx context.Context, task *hindsight.Task) error {
	if p.Merger == nil || p.Merger.Store == nil {
		return nil
	}
	var against []string
	if p.Harmed != nil {
		against = p.Harmed(task)
	}
	pre, err := p.preconditionCounters(ctx, task)
	if err != nil {
		return fmt.Errorf("count counter-evidence of task %s: %w", task.ID, err)
	}
	for _, id := range pre {
		if !slices.Contains(against, id) {
			against = append(against, id)
		}
	}
	for _, id := range against {
		if err := p.counter(ctx, p.Merger.namespacesOf(task), id); err != nil {
			return fmt.Errorf("count counter-evidence of task %s: %w", task.ID, err)
		}
	}
	if p.Helped == nil {
		return nil
	}
	ids, err := p.usedAfterShown(ctx, task, p.Helped(task))
	if err != nil {
		return fmt.Errorf("record hits of task %s: %w", task.ID, err)
	}
	if len(ids) == 0 {
		return nil
	}
	// An id is in one of the task's servers' namespaces; RecordHits
	// skips the ids a namespace does not hold.
	for _, ns := range p.Merger.namespacesOf(task) {
		if err := p.Merger.Store.RecordHits(ctx, ns, ids, task.EndedAt); err != nil {
			return fmt.Errorf("record hits of task %s: %w", task.ID, err)
		}
	}
	return nil
}

// usedAfterShown keeps the ids whose experience's tool was called, and
// succeeded, after the experience was first shown in task: a lesson that
// was shown while the agent did something else did not help, and a hit
// would reinforce whatever happened to be on screen.
func (p *Pipeline) usedAfterShown(ctx context.Context, task *hindsight.Task, ids []string) ([]string, error) {
	var out []string
	for _, id := range ids {
		e, err := p.Merger.Store.Get(ctx, p.Merger.namespace(), id)
		if errors.Is(err, hindsight.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		shown := false
		for i := range task.Steps {
			s := &task.Steps[i]
			if !shown {
				shown = slices.ContainsFunc(s.Injected, func(in hindsight.Injection) bool { return slices.Contains(in.ExperienceIDs, id) })
				continue
			}
			if s.Method == "tools/call" && !s.Local && (e.Tool == "" || s.Tool == e.Tool) && !s.Failed() {
				out = append(out, id)
				break
			}
		}
	}
	return out, nil
}

// counter records one counter-example against experience id and lowers
// its confidence accordingly.
func (p *Pipeline) counter(ctx context.Context, namespaces []string, id string) error {
	for try := 0; ; try++ {
		var e *hindsight.Experience
		var err error
		for _, ns := range namespaces {
			e, err = p.Merger.Store.Get(ctx, ns, id)
			if !errors.Is(err, hindsight.ErrNotFound) {
				break
			}
		}
		if errors.Is(err, hindsight.ErrNotFound) {
			return nil // forgotten or purged meanwhile
		}
		if err != nil {
			return err
		}
		bonus := hadBonus(e.Confidence, max(e.EvidenceCount, 1), e.CounterCount)
		e.CounterCount++
		if e.Origin != "manual" {
			e.Confidence = Confidence(max(e.EvidenceCount, 1), e.CounterCount, bonus)
		}
		err = p.Merger.Store.Put(ctx, e)
		if !errors.Is(err, hindsight.ErrConflict) || try == 2 {
			return err
		}
	}
}

func (p *Pipeline) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// uncovered returns the experiences of extra whose tool has no accepted
// experience citing any of the same failing steps.
func uncovered(extra, accepted []hindsight.Experience) []hindsight.Experience {
	var out []hindsight.Experience
	for _, x := range extra {
		covered := slices.ContainsFunc(accepted, func(a hindsight.Experience) bool {
			if a.Tool != x.Tool {
				return false
			}
			return slices.ContainsFunc(x.SourceSteps, func(i int) bool { return slices.Contains(a.SourceSteps, i) })
		})
		if !covered {
			out = append(out, x)
		}
	}
	return out
}
