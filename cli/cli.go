package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/guard"
)

// stdout is where commands print; tests of the command functions swap it.
var stdout io.Writer = os.Stdout

// daemonArgs returns the global arguments a daemon started on our behalf
// needs to read the same configuration.
func daemonArgs(g *globals) []string {
	if g.configFile == "" {
		return nil
	}
	if abs, err := filepath.Abs(g.configFile); err == nil {
		return []string{"--config", abs}
	}
	return []string{"--config", g.configFile}
}

// connect returns a client for the daemon, starting it when none answers.
func connect(ctx context.Context, g *globals) (*daemon.Client, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	return daemon.EnsureRunning(ctx, g.home, exe, daemonArgs(g)...)
}

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

// row adds a row; every cell passes through guard.Printable, so what a
// server, a client or a pack named cannot move the cursor or retitle the
// terminal.
func (t *table) row(cols ...string) {
	for i := range cols {
		cols[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(guard.Printable(cols[i]))
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// when formats a time for a table: local, to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// ago formats how long ago t was.
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String()
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// notFound rewrites a daemon's 404 as a plain error.
func notFound(err error, what string) error {
	var ae *daemon.APIError
	if errors.As(err, &ae) && ae.Status == 404 {
		return fmt.Errorf("%s not found", what)
	}
	return err
}
