package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/hindsight-proxy/hindsight/memory"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The experiences group: list, search, forget, restore, pin, unpin,
// import, export, rejected, and purge (purge.go).

func experiencesListCmd(g *globals) *cobra.Command {
	c := leaf("list [--json] [--namespace NS] [--server S] [--tool T] [--origin O] [--agent A] [--machine M] [--all] [--limit N]",
		"the experience store, with each lesson's origin and evidence", "  hindsight experiences list --server fs\n  hindsight experiences list --origin import --all --json")
	fs := c.Flags()
	asJSON := fs.Bool("json", false, "print JSON")
	var opt hindsight.ListOptions
	var prov daemon.Provenance
	fs.StringVar(&prov.Origin, "origin", "", "only this origin: rules, llm, import, manual, or exactly llm:MODEL, import:PACK")
	fs.StringVar(&prov.SourceAgent, "agent", "", "only experiences learnt from this agent")
	fs.StringVar(&prov.SourceMachine, "machine", "", "only experiences learnt on this machine (HOST, or HOST/DAEMON exactly)")
	fs.StringVar(&opt.Namespace, "namespace", "", "only this namespace (default: all)")
	fs.StringVar(&opt.Server, "server", "", "only this server")
	fs.StringVar(&opt.Tool, "tool", "", "only this tool")
	all := fs.Bool("all", false, "include superseded and forgotten experiences")
	fs.IntVar(&opt.Limit, "limit", 0, "at most this many (0: all)")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return experiencesList(ctx, g, fs, pos, asJSON, all, opt, prov)
	})
}

func experiencesList(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON, all *bool, opt hindsight.ListOptions, prov daemon.Provenance) error {
	if len(pos) > 0 || opt.Limit < 0 {
		fs.Usage()
		return usageErr("experiences list takes no arguments")
	}
	opt.IncludeDeleted, opt.IncludeSuperseded = *all, *all
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	list, err := c.ExperiencesBy(ctx, opt, prov)
	if err != nil {
		return fmt.Errorf("list experiences: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, list)
	}
	t := newTable(stdout, "ID", "NAMESPACE", "SERVER", "TOOL", "ERROR", "CONF", "EVIDENCE", "HITS", "ORIGIN", "STATE", "LESSON")
	for _, e := range list {
		t.row(e.ID, e.Namespace, dash(e.Server), dash(e.Tool), dash(e.ErrorCode), fmt.Sprintf("%.2f", e.Confidence),
			evidence(&e), strconv.Itoa(e.HitCount), dash(e.Origin), state(&e), clip(e.Lesson, 80))
	}
	return t.flush()
}

// evidence is the local evidence count, "-N" for its counter-examples,
// and what an imported pack claimed in parentheses: "3 -1", "0 (12
// imported)".
func evidence(e *hindsight.Experience) string {
	s := strconv.Itoa(e.EvidenceCount)
	if e.CounterCount > 0 {
		s += fmt.Sprintf(" -%d", e.CounterCount)
	}
	if e.ImportedEvidence > 0 {
		s += " (" + strconv.Itoa(e.ImportedEvidence) + " imported)"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// state is an experience's state for the list: forgotten, superseded,
// pinned (active and pinned), or active.
func state(e *hindsight.Experience) string {
	switch {
	case e.Deleted:
		return "forgotten"
	case e.SupersededBy != "":
		return "superseded"
	case memory.CheckText(e) != nil:
		return "quarantined" // never told; see experiences rejected
	case e.Pinned:
		return "pinned"
	}
	return "active"
}

func experiencesSearchCmd(g *globals) *cobra.Command {
	c := leaf("search QUERY [--server S] [--tool T] [--error-code C] [--task-type T] [--namespace NS] [--origin O] [--agent A] [--machine M] [-k N] [--explain] [--hit] [--json]",
		"ranked search; --explain shows how each score was made", "  hindsight experiences search \"read file\" --tool read_file\n  hindsight experiences search ENOENT -k 3 --explain")
	fs := c.Flags()
	asJSON := fs.Bool("json", false, "print JSON, best first, each with its score")
	var req daemon.SearchRequest
	q := &req.Query
	fs.StringVar(&req.Origin, "origin", "", "only this origin: rules, llm, import, manual, or exactly llm:MODEL, import:PACK")
	fs.StringVar(&req.SourceAgent, "agent", "", "only experiences learnt from this agent")
	fs.StringVar(&req.SourceMachine, "machine", "", "only experiences learnt on this machine (HOST, or HOST/DAEMON exactly)")
	fs.StringVar(&q.Server, "server", "", "only experiences of this server")
	fs.StringVar(&q.Tool, "tool", "", "only experiences of this tool")
	fs.StringVar(&q.ErrorCode, "error-code", "", "only experiences of this error code")
	fs.StringVar(&q.TaskType, "task-type", "", "only experiences of this task type")
	fs.StringVar(&q.Namespace, "namespace", "", "namespace (default: the configured one)")
	fs.IntVarP(&q.K, "k", "k", 5, "how many results")
	fs.BoolVar(&q.Explain, "explain", false, "show how each score was made")
	hit := fs.Bool("hit", false, "count this search as a hit on each lesson shown (for agents; browsing counts nothing)")
	fs.Bool("no-hit", false, "no effect, kept for old scripts: a search counts no hit unless --hit")
	_ = fs.MarkHidden("no-hit")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		q.NoHit = !*hit
		return experiencesSearch(ctx, g, fs, pos, asJSON, req)
	})
}

func experiencesSearch(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON *bool, req daemon.SearchRequest) error {
	q := &req.Query
	if len(pos) == 0 || q.K <= 0 {
		fs.Usage()
		return usageErr("experiences search needs a query")
	}
	q.Text = strings.Join(pos, " ")
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	res, err := c.SearchBy(ctx, req)
	if err != nil {
		return fmt.Errorf("search experiences: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	header := []string{"#", "SCORE", "ID", "SERVER", "TOOL", "ERROR", "CONF", "ORIGIN", "LESSON"}
	if q.Explain {
		header = append(header[:8], "BM25", "VECTOR", "RRF", "W_CONF", "W_RECENT", "W_EVID", "W_HITS", "W_COLD", "LESSON")
	}
	t := newTable(stdout, header...)
	for i, e := range res {
		row := []string{strconv.Itoa(i + 1), fmt.Sprintf("%.4f", e.Score), e.ID, dash(e.Server), dash(e.Tool), dash(e.ErrorCode), fmt.Sprintf("%.2f", e.Confidence), dash(e.Origin)}
		if x := e.Explain; q.Explain && x != nil {
			row = append(row, rank(x.BM25Rank), rank(x.VectorRank), fmt.Sprintf("%.4f", x.RRF),
				fmt.Sprintf("%.2f", x.Confidence), fmt.Sprintf("%.2f", x.Recency), fmt.Sprintf("%.2f", x.Evidence),
				fmt.Sprintf("%.2f", x.Hits), fmt.Sprintf("%.2f", x.Cold))
		} else if q.Explain {
			row = append(row, "-", "-", "-", "-", "-", "-", "-", "-")
		}
		t.row(append(row, clip(e.Lesson, 80))...)
	}
	if len(res) == 0 {
		fmt.Fprintln(stdout, "no matching experience")
		return nil
	}
	return t.flush()
}

func rank(r int) string {
	if r == 0 {
		return "-"
	}
	return strconv.Itoa(r)
}

// experiencesPin pins or unpins an experience: a pinned lesson is offered
// in its server's instructions whatever its rank.
func experiencesPin(ctx context.Context, g *globals, fs *pflag.FlagSet, args []string, pin bool) error {
	verb := map[bool]string{true: "pin", false: "unpin"}[pin]
	return changeOne(ctx, g, fs, verb, args, func(c *daemon.Client, ns, id string) (*hindsight.Experience, string, error) {
		e, err := c.Pin(ctx, ns, id, pin)
		return e, verb + "ned", err
	})
}

func experiencesForget(ctx context.Context, g *globals, fs *pflag.FlagSet, args []string, forget bool) error {
	verb := map[bool]string{true: "forget", false: "restore"}[forget]
	return changeOne(ctx, g, fs, verb, args, func(c *daemon.Client, ns, id string) (*hindsight.Experience, string, error) {
		if forget {
			e, err := c.Forget(ctx, ns, id)
			return e, "forgotten (restore with `hindsight experiences restore " + id + "`)", err
		}
		e, err := c.Restore(ctx, ns, id)
		return e, "restored", err
	})
}

// changeOneCmd is `experiences VERB ID [--namespace NS] [--json]` for
// forget, restore, pin and unpin.
func changeOneCmd(g *globals, verb string) *cobra.Command {
	short := map[string]string{
		"forget":  "soft delete an experience (restore undoes it)",
		"restore": "undo forget",
		"pin":     "offer a lesson in its server's instructions whatever its rank",
		"unpin":   "undo pin",
	}[verb]
	c := leaf(verb+" ID [--namespace NS] [--json]", short, "  hindsight experiences "+verb+" EXP1")
	c.Flags().Bool("json", false, "print the experience as JSON")
	c.Flags().String("namespace", "", "namespace of the experience (default: the configured one, then any)")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		switch verb {
		case "pin", "unpin":
			return experiencesPin(ctx, g, fs, pos, verb == "pin")
		}
		return experiencesForget(ctx, g, fs, pos, verb == "forget")
	})
}

// changeOne runs `experiences VERB ID [--namespace NS] [--json]`: change
// makes the change and says what was done; the experience is printed as
// JSON, or the line "experience ID DONE".
func changeOne(ctx context.Context, g *globals, fs *pflag.FlagSet, verb string, pos []string, change func(c *daemon.Client, ns, id string) (*hindsight.Experience, string, error)) error {
	asJSON, _ := fs.GetBool("json")
	ns, _ := fs.GetString("namespace")
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("experiences %s takes one experience id", verb)
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	e, done, err := change(c, ns, pos[0])
	if q := (*daemon.QueuedError)(nil); errors.As(err, &q) {
		return printQueued(asJSON, q)
	}
	if err != nil {
		return notFound(err, "experience "+pos[0])
	}
	if asJSON {
		return printJSON(stdout, e)
	}
	fmt.Fprintf(stdout, "experience %s %s\n", guard.Printable(e.ID), guard.Printable(done))
	return nil
}

func experiencesImportCmd(g *globals) *cobra.Command {
	c := leaf("import FILE|- [--namespace NS] [--pack NAME] [--trust] [--json]", "a JSONL pack of experiences; imports are untrusted",
		"  hindsight experiences import team-pack.jsonl\n  hindsight experiences import --pack shared --namespace team - < pack.jsonl")
	fs := c.Flags()
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var opt daemon.ImportOptions
	fs.StringVar(&opt.Namespace, "namespace", "", "namespace to import into, whatever the file says (default: the configured one)")
	fs.StringVar(&opt.Pack, "pack", "", "the pack's name in each experience's origin, import:NAME (default: the file's base name)")
	fs.BoolVar(&opt.Trust, "trust", false, fmt.Sprintf("keep the pack's confidence instead of capping it at %.1f (text is cleaned and redacted regardless)", daemon.ImportConfidenceCap))
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return experiencesImport(ctx, g, fs, pos, asJSON, opt)
	})
}

func experiencesImport(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON *bool, opt daemon.ImportOptions) error {
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("experiences import takes one JSONL file (- for stdin)")
	}
	var r io.Reader = os.Stdin
	if opt.Pack == "" && pos[0] != "-" {
		opt.Pack = strings.TrimSuffix(filepath.Base(pos[0]), filepath.Ext(pos[0]))
	}
	if pos[0] != "-" {
		f, err := os.Open(pos[0])
		if err != nil {
			return fmt.Errorf("open import: %w", err)
		}
		defer f.Close()
		r = f
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	b := newBar(g.quiet, "importing experiences", -1)
	if b != nil && pos[0] != "-" {
		b.set(0, countFileLines(pos[0]))
	}
	res, err := c.ImportWith(ctx, lineCounter{r: r, bar: b}, opt)
	b.finish()
	if err != nil {
		return fmt.Errorf("import experiences: %w", err)
	}
	if *asJSON {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "imported %d, updated %d, skipped %d (unchanged, or local lessons kept)\n", res.Imported, res.Updated, res.Skipped)
		if len(res.Kept) > 0 {
			fmt.Fprintf(stdout, "kept local lessons a pack may not replace: %s\n", guard.Printable(strings.Join(res.Kept, " ")))
		}
		if res.Redactions > 0 {
			fmt.Fprintf(stdout, "redacted %d secret(s) in the pack\n", res.Redactions)
		}
		if !opt.Trust && res.Imported+res.Updated > 0 {
			fmt.Fprintf(stdout, "confidence capped at %.1f until local evidence confirms a lesson (--trust keeps the pack's)\n", daemon.ImportConfidenceCap)
		}
		for _, e := range res.Errors {
			fmt.Fprintln(stdout, "error:", guard.Printable(e))
		}
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("import experiences: %d failed", len(res.Errors))
	}
	return nil
}

func experiencesExportCmd(g *globals) *cobra.Command {
	c := leaf("export [--out FILE] [--namespace NS] [--server S] [--tool T] [--all]", "the experiences as a JSONL pack",
		"  hindsight experiences export --out pack.jsonl\n  hindsight experiences export --server fs > fs-pack.jsonl")
	fs := c.Flags()
	out := fs.String("out", "", "write to FILE (mode 0600) instead of stdout")
	var opt hindsight.ListOptions
	fs.StringVar(&opt.Namespace, "namespace", "", "only this namespace (default: all)")
	fs.StringVar(&opt.Server, "server", "", "only this server")
	fs.StringVar(&opt.Tool, "tool", "", "only this tool")
	all := fs.Bool("all", false, "include superseded and forgotten experiences")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return experiencesExport(ctx, g, fs, pos, out, all, opt)
	})
}

func experiencesExport(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, out *string, all *bool, opt hindsight.ListOptions) error {
	if len(pos) > 0 {
		fs.Usage()
		return usageErr("experiences export takes no arguments")
	}
	opt.IncludeDeleted, opt.IncludeSuperseded = *all, *all
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	b := newBar(g.quiet, "exporting experiences", -1)
	defer b.finish()
	return writeOut(*out, func(w io.Writer) error { return c.ExportExperiences(ctx, lineCounter{w: w, bar: b}, opt) })
}

func experiencesRejectedCmd(g *globals) *cobra.Command {
	c := leaf("rejected [--limit N] [--json]", "the lessons reflection refused, newest first, with why", "  hindsight experiences rejected --limit 10")
	asJSON := c.Flags().Bool("json", false, "print JSON")
	limit := c.Flags().Int("limit", 50, "at most this many, newest first")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return experiencesRejected(ctx, g, fs, pos, asJSON, limit)
	})
}

// experiencesRejected is `hindsight experiences rejected [--limit N]
// [--json]`: the lessons reflection refused, newest first, with why.
func experiencesRejected(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON *bool, limit *int) error {
	if len(pos) > 0 || *limit <= 0 {
		fs.Usage()
		return usageErr("experiences rejected takes no arguments and a positive --limit")
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	list, err := c.Rejected(ctx, *limit)
	if err != nil {
		return fmt.Errorf("list rejected lessons: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, list)
	}
	t := newTable(stdout, "WHEN", "TASK", "TOOL", "ORIGIN", "REASON", "DETAIL", "LESSON")
	for _, r := range list {
		t.row(when(r.At), r.TaskID, dash(r.Tool), dash(r.Origin), r.Reason, clip(r.Detail, 60), clip(r.Lesson, 80))
	}
	return t.flush()
}

// printQueued says that the daemon queued a write while the experience
// store is unreachable (a daemon.QueuedResult as JSON).
func printQueued(asJSON bool, q *daemon.QueuedError) error {
	if asJSON {
		return printJSON(stdout, daemon.QueuedResult{Queued: true, Op: q.Op})
	}
	fmt.Fprintln(stdout, "queued: the store is unreachable; applied when it is back")
	return nil
}
