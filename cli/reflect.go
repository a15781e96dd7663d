package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/reflect"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func reflectCmd(g *globals) *cobra.Command {
	c := leaf("reflect [--pending] [--task ID]… | reflect --replay [--since DATE] [--task ID]… [--reflector rules|llm] [--model M] [--prompt FILE] [--dry-run] [--json]",
		"run reflection now, or again over stored final tasks (--replay)",
		"  hindsight reflect\n  hindsight reflect --task TASK\n  hindsight reflect --replay --dry-run --reflector rules --since 2026-11-01")
	fs := c.Flags()
	pending := fs.Bool("pending", false, "reflect every task waiting for reflection")
	taskIDs := fs.StringArray("task", nil, "reflect this task (repeatable)")
	var ro replayOptions
	ro.replay = fs.Bool("replay", false, "reflect again over stored final tasks and show what changes in the experiences")
	ro.since = fs.String("since", "", "with --replay: only tasks ended at or after DATE (2006-01-02 or RFC 3339)")
	ro.reflector = fs.String("reflector", "", "with --replay: rules or llm (default: the daemon's)")
	ro.model = fs.String("model", "", "with --replay: the LLM model to reflect with")
	ro.prompt = fs.String("prompt", "", "with --replay: the LLM prompt template FILE to reflect with")
	ro.dryRun = fs.Bool("dry-run", false, "with --replay: plan only; the experiences stay as they are")
	ro.json = fs.Bool("json", false, "with --replay: print the plan as JSON")
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, pos []string) error {
		return runReflect(ctx, g, append(*taskIDs, pos...), pending, ro)
	})
}

// runReflect is `hindsight reflect [--pending] [--task ID]…`: reflection
// now, in the daemon, with a progress bar on stderr. Without flags it runs
// the pending tasks.
func runReflect(ctx context.Context, g *globals, tasks []string, pending *bool, ro replayOptions) error {
	quiet := &g.quiet
	if *ro.replay {
		if *pending {
			return usageErr("reflect --replay takes no --pending")
		}
		return reflectReplay(ctx, g, tasks, ro, *quiet)
	}
	if *ro.since != "" || *ro.reflector != "" || *ro.model != "" || *ro.prompt != "" || *ro.dryRun || *ro.json {
		return usageErr("--since, --reflector, --model, --prompt, --dry-run and --json go with --replay")
	}
	if len(tasks) == 0 {
		*pending = true
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	bar := newProgress("reflecting", *quiet)
	err = c.Reflect(ctx, tasks, *pending, bar.set)
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "reflected %d tasks\n", bar.last)
	return nil
}

// progress is a progress bar on stderr (see newBar), drawn once the
// total is known; last is the latest count, bar or not.
type progress struct {
	desc  string
	quiet bool
	bar   *bar
	last  int
}

func newProgress(desc string, quiet bool) *progress { return &progress{desc: desc, quiet: quiet} }

func (p *progress) set(done, total int) {
	p.last = done
	if p.bar == nil {
		p.bar = newBar(p.quiet, p.desc, total)
	}
	p.bar.set(done, total)
}

func (p *progress) finish() { p.bar.finish() }

type replayOptions struct {
	replay, dryRun, json            *bool
	since, reflector, model, prompt *string
}

// reflectReplay is `hindsight reflect --replay`: reflection run again, in
// the daemon, over stored final tasks; the plan of what changes (or, with
// --dry-run, would change) in the experiences is printed.
func reflectReplay(ctx context.Context, g *globals, tasks []string, o replayOptions, quiet bool) error {
	req := daemon.ReflectReplayRequest{TaskIDs: tasks, Reflector: *o.reflector, Model: *o.model, DryRun: *o.dryRun}
	switch *o.reflector {
	case "", "rules", "llm":
	default:
		return usageErr("--reflector is rules or llm")
	}
	if *o.since != "" {
		t, err := parseDate(*o.since)
		if err != nil {
			return usageErr("--since: %v", err)
		}
		req.Since = &t
	}
	if *o.prompt != "" {
		abs, err := filepath.Abs(*o.prompt)
		if err != nil {
			return fmt.Errorf("replay reflection: %w", err)
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("replay reflection: %w", err)
		}
		req.Prompt = abs
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	desc := "reflecting again"
	if req.DryRun {
		desc = "planning"
	}
	bar := newProgress(desc, quiet)
	plan, err := c.ReflectReplay(ctx, req, bar.set)
	bar.finish()
	if err != nil {
		return notFound(err, "task")
	}
	if *o.json {
		return printJSON(stdout, plan)
	}
	return printPlan(plan)
}

// parseDate reads a date (2006-01-02, local midnight) or an RFC 3339 time.
func parseDate(s string) (time.Time, error) {
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339, s)
}

func printPlan(plan *daemon.ReflectPlan) error {
	t := newTable(stdout, "TASK", "OUTCOME", "EXPERIENCE", "TOOL", "LESSON")
	for _, c := range plan.Changes {
		id := c.ID
		if c.Superseded != "" {
			id += " (supersedes " + c.Superseded + ")"
		}
		t.row(c.Task, c.Outcome, id, c.Tool, clip(oneLine(c.Lesson), 70))
	}
	if err := t.flush(); err != nil {
		return err
	}
	counts := map[string]int{}
	for _, c := range plan.Changes {
		counts[c.Outcome]++
	}
	verb := "changed"
	if plan.DryRun {
		verb = "would change (dry run: nothing changed)"
	}
	fmt.Fprintf(stdout, "%d tasks, %d candidates (%d dropped by validation): %d added, %d merged, %d superseded, %d left as they are; %s\n",
		plan.Tasks, plan.Candidates, plan.Dropped, counts[reflect.Added], counts[reflect.Reinforced], counts[reflect.Superseded], len(plan.Left), verb)
	for _, f := range plan.Failed {
		fmt.Fprintln(stdout, "failed:", f)
	}
	return nil
}
