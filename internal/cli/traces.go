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
)

// runTraces is `hindsight traces list | show TASK | export | import FILE`.
func runTraces(ctx context.Context, g *globals, args []string) error {
	if len(args) == 0 {
		return usageErr("traces list | show TASK | export | import FILE | purge TASK…|--before DATE")
	}
	switch args[0] {
	case "list":
		return tracesList(ctx, g, args[1:])
	case "show":
		return tracesShow(ctx, g, args[1:])
	case "export":
		return tracesExport(ctx, g, args[1:])
	case "import":
		return tracesImport(ctx, g, args[1:])
	case "purge":
		return tracesPurge(ctx, g, args[1:])
	}
	return usageErr("traces: unknown subcommand %q (want list, show, export, import or purge)", args[0])
}

func tracesList(ctx context.Context, g *globals, args []string) error {
	fs := newFlags("traces list", "traces list [--json] [--final | --open] [--limit N]")
	asJSON := fs.Bool("json", false, "print JSON")
	final := fs.Bool("final", false, "only final tasks")
	open := fs.Bool("open", false, "only tasks not final yet")
	limit := fs.Int("limit", 0, "at most this many tasks, newest first (0: all)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
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

// multiFlag collects a repeated string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func tracesExport(ctx context.Context, g *globals, args []string) error {
	fs := newFlags("traces export", "traces export [--out FILE] [--task ID]…")
	out := fs.String("out", "", "write to FILE (mode 0600) instead of stdout")
	var tasks multiFlag
	fs.Var(&tasks, "task", "export only this task (repeatable)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	tasks = append(tasks, pos...)
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
