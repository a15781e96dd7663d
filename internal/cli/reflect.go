package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/schollz/progressbar/v3"
)

// runReflect is `hindsight reflect [--pending] [--task ID]…`: reflection
// now, in the daemon, with a progress bar on stderr. Without flags it runs
// the pending tasks.
func runReflect(ctx context.Context, g *globals, args []string) error {
	fs := newFlags("reflect", "reflect [--pending] [--task ID]…")
	pending := fs.Bool("pending", false, "reflect every task waiting for reflection")
	var tasks multiFlag
	fs.Var(&tasks, "task", "reflect this task (repeatable)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	tasks = append(tasks, pos...)
	if len(tasks) == 0 {
		*pending = true
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	var bar *progressbar.ProgressBar
	last := 0
	progress := func(done, total int) {
		last = done
		if *quiet {
			return
		}
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionSetDescription("reflecting"), progressbar.OptionShowCount())
		}
		bar.ChangeMax(total)
		_ = bar.Set(done)
	}
	err = c.Reflect(ctx, tasks, *pending, progress)
	if bar != nil {
		_ = bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "reflected %d tasks\n", last)
	return nil
}
