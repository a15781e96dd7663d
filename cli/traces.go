package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The traces group: list, show, export, import (traces_import.go) and
// purge (purge.go).

func tracesListCmd(g *globals) *cobra.Command {
	c := leaf("list [--json] [--final | --open] [--limit N]", "tasks, newest first",
		"  hindsight traces list --open --limit 10\n  hindsight traces list --final --json")
	fs := c.Flags()
	asJSON := fs.Bool("json", false, "print JSON")
	final := fs.Bool("final", false, "only final tasks")
	open := fs.Bool("open", false, "only tasks not final yet")
	limit := fs.Int("limit", 0, "at most this many tasks, newest first (0: all)")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return tracesList(ctx, g, fs, pos, asJSON, final, open, limit)
	})
}

func tracesList(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON, final, open *bool, limit *int) error {
	if len(pos) > 0 || (*final && *open) || *limit < 0 {
		fs.Usage()
		return usageErr("traces list takes no arguments and one of --final or --open")
	}
	var f daemon.TaskFilter
	f.Limit = *limit
	if *final || *open {
		f.Final = final
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	tasks, err := c.Tasks(ctx, f)
	if err != nil {
		return fmt.Errorf("list tasks: %w", err)
	}
	if *asJSON {
		return printJSON(stdout, tasks)
	}
	return printTasks(stdout, tasks)
}

func printTasks(w io.Writer, tasks []hindsight.Task) error {
	t := newTable(w, "ID", "STARTED", "ENDED", "FINAL", "STEPS", "FAILURES", "REFLECTION", "SERVERS")
	for _, task := range tasks {
		refl := task.Reflection
		if refl == "" {
			refl = "-"
		}
		t.row(task.ID, when(task.StartedAt), when(task.EndedAt), yesNo(task.Final),
			strconv.Itoa(task.StepCount), strconv.Itoa(task.FailureCount), refl, strings.Join(task.Servers, ","))
	}
	return t.flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func tracesShowCmd(g *globals) *cobra.Command {
	c := leaf("show TASK [--json]", "a task and its steps", "  hindsight traces show 0193c2d4-…\n  hindsight traces show TASK --json | jq '.steps | length'")
	asJSON := c.Flags().Bool("json", false, "print JSON: the task with a steps array")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return tracesShow(ctx, g, fs, pos, asJSON)
	})
}

func tracesExportCmd(g *globals) *cobra.Command {
	c := leaf("export [--out FILE] [--task ID]… [TASK…]", "every step as JSON Lines", "  hindsight traces export --out steps.jsonl\n  hindsight traces export --task TASK > one.jsonl")
	out := c.Flags().String("out", "", "write to FILE (mode 0600) instead of stdout")
	tasks := c.Flags().StringArray("task", nil, "export only this task (repeatable)")
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, pos []string) error {
		return tracesExport(ctx, g, append(*tasks, pos...), out)
	})
}

func tracesExport(ctx context.Context, g *globals, tasks []string, out *string) error {
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	return writeOut(*out, func(w io.Writer) error {
		if err := c.Export(ctx, w, tasks...); err != nil {
			return notFound(err, "task")
		}
		return nil
	})
}

// writeOut runs fn on stdout, or on FILE written atomically (a temporary
// file renamed into place, mode 0600), so a failed export leaves no
// half-written file.
func writeOut(path string, fn func(io.Writer) error) error {
	if path == "" || path == "-" {
		return fn(stdout)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create output: %w", err)
	}
	defer os.Remove(f.Name())
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
