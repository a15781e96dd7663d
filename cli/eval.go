package cli

import (
	"context"
	"fmt"

	"github.com/hindsight-proxy/hindsight/eval"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func evalCmd(g *globals) *cobra.Command {
	c := leaf("eval [--json] [--learn SHARE] [--no-seen-once] FILE|DIR…", "learn from half of recorded tasks, replay the other half's failures",
		"  hindsight traces export --out tasks.jsonl && hindsight eval tasks.jsonl\n  hindsight eval --json --learn 0.7 exports/\n  hindsight eval testdata/livemcpbench testdata/toolbench testdata/corpus   # one row per corpus")
	asJSON := c.Flags().Bool("json", false, "print the report as JSON")
	learn := c.Flags().Float64("learn", 0.5, "share of tasks, by start time, to learn from")
	noSeenOnce := c.Flags().Bool("no-seen-once", false, "replay without appending lessons seen in one task to the errors their templates fit exactly")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return runEval(ctx, g, fs, pos, asJSON, learn, noSeenOnce)
	})
}

// runEval is `hindsight eval [--json] [--learn SHARE] [--no-seen-once]
// FILE|DIR…`. One corpus prints its full report; several print one row
// per corpus (--json: an array of {corpus, report}), each evaluated on
// its own.
func runEval(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON *bool, learn *float64, noSeenOnce *bool) error {
	if len(pos) == 0 || *learn <= 0 || *learn >= 1 {
		fs.Usage()
		return usageErr("eval takes trace exports (JSONL files, or directories of them) and --learn in (0, 1)")
	}
	var runs []corpusReport
	for _, p := range pos {
		steps, labels, err := eval.Load(p)
		if err != nil {
			return err
		}
		rep, err := eval.Run(ctx, steps, labels, eval.Options{Learn: *learn, NoSeenOnce: *noSeenOnce})
		if err != nil {
			return fmt.Errorf("evaluate %s: %w", p, err)
		}
		runs = append(runs, corpusReport{p, rep})
	}
	switch {
	case *asJSON && len(runs) == 1:
		return printJSON(stdout, runs[0].Report)
	case *asJSON:
		return printJSON(stdout, runs)
	case len(runs) == 1:
		return printEval(runs[0].Report)
	}
	return printEvalRows(runs)
}

// corpusReport is one corpus's report in `eval --json` over several.
type corpusReport struct {
	Corpus string       `json:"corpus"`
	Report *eval.Report `json:"report"`
}

// printEvalRows prints one row per corpus: what the learning table of
// docs/learning.md shows.
func printEvalRows(runs []corpusReport) error {
	t := newTable(stdout, "CORPUS", "TASKS", "LEAKS", "PRECISION", "RECALL", "VACUOUS STORED (REFUSED)", "LESSONS (≥ GATE)", "TOOL TOKENS HELPED")
	for _, r := range runs {
		x := r.Report
		t.row(r.Corpus, fmt.Sprint(x.Tasks), fmt.Sprint(x.LessonsOneOff),
			fmt.Sprintf("%.3f (%d/%d)", x.Precision, x.RelevantLines, x.LinesAppended),
			fmt.Sprintf("%.3f (%d/%d)", x.Recall, x.KnownHelped, x.KnownFailures),
			fmt.Sprintf("%d (%d)", x.VacuousStored, x.VacuousRefused),
			fmt.Sprintf("%d (%d)", x.LessonsStored, x.LessonsAboveGate),
			fmt.Sprintf("%.3f", x.TokenShare))
	}
	return t.flush()
}

func printEval(r *eval.Report) error {
	t := newTable(stdout, "MEASURE", "VALUE")
	t.row("tasks (learned from / unseen)", fmt.Sprintf("%d (%d / %d)", r.Tasks, r.LearnTasks, r.UnseenTasks))
	t.row("lessons stored", fmt.Sprint(r.LessonsStored))
	t.row("  at or above the injection gate", fmt.Sprint(r.LessonsAboveGate))
	t.row("  vacuous (advice that only restates the error)", fmt.Sprint(r.VacuousStored))
	t.row("candidates refused as vacuous", fmt.Sprint(r.VacuousRefused))
	t.row("lessons quoting one-off values", fmt.Sprint(r.LessonsOneOff))
	t.row("unseen failing calls (isError results)", fmt.Sprint(r.UnseenFailures))
	t.row("  with an error seen while learning", fmt.Sprint(r.KnownFailures))
	t.row("lines appended to them", fmt.Sprint(r.LinesAppended))
	t.row("  about the call's error", fmt.Sprint(r.RelevantLines))
	t.row("precision", fmt.Sprintf("%.3f", r.Precision))
	t.row("recall (known errors that got a relevant line)", fmt.Sprintf("%.3f", r.Recall))
	t.row("  and with a JSON-RPC error (nothing to append to)", fmt.Sprint(r.RPCErrors))
	t.row("tool tokens of the unseen half", fmt.Sprint(r.ToolTokens))
	t.row("  of helped failures and their retries", fmt.Sprintf("%d (%.3f)", r.HelpedTokens, r.TokenShare))
	t.row("truth", r.Truth)
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	l := newTable(stdout, "EVIDENCE", "CONF", "TOOL", "LESSON")
	for _, x := range r.Lessons {
		ev := fmt.Sprint(x.EvidenceCount)
		if x.CounterCount > 0 {
			ev += fmt.Sprintf(" (-%d)", x.CounterCount)
		}
		l.row(ev, fmt.Sprintf("%.2f", x.Confidence), x.Tool, x.Lesson)
	}
	if err := l.flush(); err != nil {
		return err
	}
	for _, x := range r.OneOffExamples {
		fmt.Fprintln(stdout, "one-off:", x)
	}
	for _, x := range r.Vacuous {
		fmt.Fprintln(stdout, "refused as vacuous:", x)
	}
	for _, x := range r.Irrelevant {
		fmt.Fprintln(stdout, "not about the error:", x)
	}
	for _, x := range r.Missed {
		fmt.Fprintln(stdout, "known error, no line:", x)
	}
	return nil
}
