package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/internal/losses"
	"github.com/hindsight-proxy/hindsight/spool"
	"github.com/hindsight-proxy/hindsight/toolpin"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// errDaemonDown makes `hindsight status` exit 1 when no daemon answers,
// after it printed what it could see without one.
var errDaemonDown = errors.New("the daemon is not running")

func statusCmd(g *globals) *cobra.Command {
	c := leaf("status [--json]", "daemon health, outbox depths, reflection queue, store sizes", "  hindsight status\n  hindsight status --json")
	asJSON := c.Flags().Bool("json", false, "print JSON")
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, pos []string) error { return runStatus(ctx, g, pos, asJSON) })
}

// runStatus shows daemon health, outbox depths, the reflection queue and
// store sizes. It does not start the daemon.
func runStatus(ctx context.Context, g *globals, pos []string, asJSON *bool) error {
	if len(pos) > 0 {
		return usageErr("status takes no arguments")
	}
	c := daemon.NewClient(g.home.Socket())
	defer c.CloseIdle()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.Status(cctx)
	if err != nil {
		st = &daemon.Status{Running: false}
		pid := daemon.LockHolder(g.home)
		switch {
		case pid > 0 && daemon.LockHeld(g.home):
			// A daemon holds the lock but does not answer.
			st.Daemon = &daemon.Health{PID: pid, Home: string(g.home)}
			st.Hint = fmt.Sprintf("the daemon (pid %d) holds its lock but does not answer on %s; see %s, and stop it (kill %d) so a sidecar starts a new one",
				pid, g.home.Socket(), g.home.Path("logs", "daemon.log"), pid)
		case pid > 0:
			st.Hint = fmt.Sprintf("the daemon (pid %d) died; see %s for why. A sidecar starts a new one within seconds of its next step, or run `hindsight daemon`",
				pid, g.home.Path("logs", "daemon.log"))
		default:
			st.Hint = "no daemon has run here, or it stopped cleanly; a sidecar starts one with its first step, or run `hindsight daemon`"
		}
		if se := readStartError(g.home); se != nil && !st.Running && st.Daemon == nil {
			st.StartError = se
			st.Hint = fmt.Sprintf("the last daemon failed to start (%s): %s. Sidecars keep their steps in their outboxes meanwhile; see %s",
				when(se.At), se.Error, g.home.Path("logs", "daemon.log"))
		}
	}
	st.Outboxes = spool.List(g.home)
	st.Losses = losses.Scan(string(g.home))
	tools := toolpin.Summarize(g.home)
	st.Tools = &tools
	if *asJSON {
		if err := printJSON(stdout, st); err != nil {
			return err
		}
	} else if err := printStatus(stdout, g, st, err); err != nil {
		return err
	}
	if !st.Running {
		return errDaemonDown
	}
	return nil
}

func printStatus(w io.Writer, g *globals, st *daemon.Status, cause error) error {
	t := newTable(w)
	now := time.Now()
	if st.Running {
		d := st.Daemon
		t.row("daemon", "running", fmt.Sprintf("pid %d, up %s, %s", d.PID, ago(d.StartedAt, now), g.home.Socket()))
	} else {
		detail := g.home.Socket()
		if cause != nil {
			detail = cause.Error()
		}
		t.row("daemon", "not running", detail)
		if st.Hint != "" {
			t.row("", "", st.Hint)
		}
	}
	if st.DiskLow {
		t.row("disk", "short of space", fmt.Sprintf("the daemon refuses steps until space returns (%d batches refused); sidecars hold them in memory, then drop and count them", st.DiskRefused))
	}
	if tr := st.Traces; tr != nil {
		t.row("traces", fmt.Sprintf("%d tasks", tr.Tasks), fmt.Sprintf("%d open, %d final, %d steps, %s",
			tr.OpenTasks, tr.FinalTasks, tr.Steps, humanBytes(tr.DiskBytes)))
	}
	switch q := st.Reflection; {
	case q != nil:
		detail := fmt.Sprintf("%d retrying, %d running, %d done, %d failed, LLM last hour: %d calls, %d tokens",
			q.Retrying, q.Running, q.Done, q.Failed, q.LLMCallsLastHour, q.LLMTokensLastHour)
		if q.LastRunAt != nil {
			detail += ", last run " + when(*q.LastRunAt)
		}
		if q.LastError != "" {
			detail += ", last error: " + clip(q.LastError, 80)
		}
		t.row("reflection", fmt.Sprintf("%d pending", q.Pending), detail)
	case st.Running:
		waiting := 0
		if st.Traces != nil {
			waiting = st.Traces.Unqueued
		}
		t.row("reflection", "off", fmt.Sprintf("no reflection queue; %d final tasks waiting", waiting))
	}
	if e := st.Experiences; e != nil {
		if e.Available {
			t.row("experiences", fmt.Sprintf("%d active", e.Active), fmt.Sprintf("%s, %d total, %d superseded, %d deleted",
				e.Backend, e.Total, e.Superseded, e.Deleted))
		} else {
			t.row("experiences", "unavailable", e.Backend+": "+e.Error)
		}
	}
	if q := st.StoreOps; q != nil && (q.Depth > 0 || q.LastError != "" || q.Dropped > 0) {
		detail := "writes wait for the experience store"
		if q.Oldest != nil {
			detail += ", oldest queued " + ago(*q.Oldest, time.Now()) + " ago"
		}
		if q.Dropped > 0 {
			detail += fmt.Sprintf(", %d refused by the store and dropped", q.Dropped)
		}
		if q.LastError != "" {
			detail += ", last error: " + clip(q.LastError, 80)
		}
		t.row("store queue", fmt.Sprintf("%d queued", q.Depth), detail)
	}
	names := make([]string, 0, len(st.Disk))
	for n := range st.Disk {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.row("disk", n, humanBytes(st.Disk[n]))
	}
	live, orphan := 0, 0
	var bytes, depth, unsettled int64
	for _, o := range st.Outboxes {
		if o.Live {
			live++
		} else {
			orphan++
		}
		bytes += o.Bytes
		unsettled += o.Unsettled
		if o.Stats != nil {
			depth += o.Stats.Depth
		}
	}
	if len(st.Losses) == 0 && unsettled == 0 {
		t.row("losses", "none", "no step lost or cut")
	}
	if unsettled > 0 {
		t.row("losses", "dead sidecars", fmt.Sprintf("%d answered calls lost (crash), counted when their outboxes are drained", unsettled))
	}
	for _, l := range st.Losses {
		reasons := make([]string, 0, len(l.Reasons))
		for r, n := range l.Reasons {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		}
		sort.Strings(reasons)
		detail := fmt.Sprintf("%d lost, %d truncated (%s); last: %s %s", l.Lost, l.Truncated, strings.Join(reasons, ", "), l.LastReason, when(l.LastAt))
		t.row("losses", l.Server, detail)
	}
	printTools(t, st.Tools)
	t.row("outboxes", strconv.Itoa(len(st.Outboxes)), fmt.Sprintf("%d live, %d left by dead sidecars, %d steps undelivered, %s",
		live, orphan, depth, humanBytes(bytes)))
	for _, o := range st.Outboxes {
		state := "live"
		if !o.Live {
			state = "orphan"
		}
		detail := fmt.Sprintf("%s, %s", state, humanBytes(o.Bytes))
		if s := o.Stats; s != nil {
			detail = fmt.Sprintf("%s, %s: depth %d, captured %d, delivered %d, dropped %d, rejected %d",
				s.Server, detail, s.Depth, s.Captured, s.Delivered, s.Dropped, s.Rejected)
			if s.Held > 0 {
				detail += fmt.Sprintf(", %d held in memory (disk full)", s.Held)
			}
			if s.BodiesRefused > 0 {
				detail += fmt.Sprintf(", %d requests refused over the body budget", s.BodiesRefused)
			}
			if s.ServerCrashes > 0 && s.LastCrashAt != nil {
				detail += fmt.Sprintf(", server started %d times, crashed %d (last %s)", s.ServerStarts, s.ServerCrashes, when(*s.LastCrashAt))
			}
			detail += " (as of " + when(s.UpdatedAt) + ")"
		}
		t.row("  outbox", o.Name, detail)
	}
	return t.flush()
}

// printTools adds the tools rows: how many are pinned, and each tool that
// changed or is flagged.
func printTools(t *table, s *toolpin.Summary) {
	if s == nil {
		return
	}
	if s.Error != "" {
		t.row("tools", "unreadable", clip(s.Error, 120))
	}
	c := s.Counts
	if len(c) == 0 {
		return
	}
	state := fmt.Sprintf("%d pinned", c[toolpin.StatePinned])
	detail := "no tool changed or flagged"
	if len(s.Alerts) > 0 {
		state = fmt.Sprintf("%d changed, %d flagged", c[toolpin.StateChanged], c[toolpin.StateFlagged])
		detail = fmt.Sprintf("%d pinned; review with `hindsight tools list`, allow with `hindsight tools approve SERVER TOOL`", c[toolpin.StatePinned])
	}
	t.row("tools", state, detail)
	for _, a := range s.Alerts {
		d := a.State + " since " + when(a.SeenAt)
		if a.Flag != "" {
			d += ": " + clip(a.Flag, 80)
		}
		t.row("  tool", a.Server+" "+a.Tool, d)
	}
}
