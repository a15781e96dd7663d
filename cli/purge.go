package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func tracesPurgeCmd(g *globals) *cobra.Command {
	c := leaf("purge TASK… | --before DATE [--with-experiences] [--json]", "remove tasks for good, erased from disk",
		"  hindsight traces purge TASK --with-experiences\n  hindsight traces purge --before 720h")
	fs := c.Flags()
	asJSON := fs.Bool("json", false, "print the result as JSON")
	before := fs.String("before", "", "also every task whose last step is before DATE (2026-11-01, RFC 3339, or a duration ago such as 720h)")
	derived := fs.Bool("with-experiences", false, "also purge the experiences learnt from the purged tasks")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return tracesPurge(ctx, g, fs, pos, asJSON, before, derived)
	})
}

// tracesPurge is `hindsight traces purge TASK… | --before DATE`: tasks
// removed for good, erased from the daemon's files.
func tracesPurge(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON *bool, before *string, derived *bool) error {
	req := daemon.PurgeTasksRequest{IDs: pos}
	if *before != "" {
		t, err := parseBefore(*before, time.Now())
		if err != nil {
			return usageErr("traces purge: --before: %v", err)
		}
		req.Before = &t
	}
	if len(pos) == 0 && req.Before == nil {
		fs.Usage()
		return usageErr("traces purge needs task ids or --before DATE")
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	res, err := c.PurgeTasks(ctx, req)
	if err != nil {
		return fmt.Errorf("purge traces: %w", err)
	}
	var exps *daemon.PurgeResult
	queued := false
	if *derived && len(res.Derived) > 0 {
		r, err := c.PurgeExperiences(ctx, "", res.Derived)
		if q := (*daemon.QueuedError)(nil); errors.As(err, &q) {
			queued, err = true, nil
		}
		if err != nil {
			return fmt.Errorf("purge the experiences of the purged tasks: %w", err)
		}
		if !queued {
			exps = &r
		}
	}
	if *asJSON {
		return printJSON(stdout, struct {
			daemon.PurgeResult
			Experiences *daemon.PurgeResult `json:"experiences,omitempty"`
		}{res, exps})
	}
	fmt.Fprintf(stdout, "purged %d task(s)%s\n", len(res.Purged), list(res.Purged))
	if exps != nil {
		fmt.Fprintf(stdout, "purged %d experience(s) learnt from them%s\n", len(exps.Purged), list(exps.Purged))
		res.Derived = nil
	}
	if queued {
		fmt.Fprintf(stdout, "purge of the experience(s) learnt from them%s queued: the store is unreachable; applied when it is back\n", list(res.Derived))
		res.Derived = nil
	}
	if len(res.Purged) > 0 {
		fmt.Fprintln(stdout, "(erased from every file of the trace store; copies you made, such as exports and backups, are yours to remove)")
	}
	if len(res.Derived) > 0 {
		fmt.Fprintf(stdout, "experiences learnt from them (purge them too if the secret may be in them, or use --with-experiences):\n  hindsight experiences purge %s\n", strings.Join(res.Derived, " "))
	}
	return nil
}

func experiencesPurgeCmd(g *globals) *cobra.Command {
	c := leaf("purge ID… [--namespace NS] [--json]", "remove experiences for good, erased from disk", "  hindsight experiences purge EXP1 EXP2")
	asJSON := c.Flags().Bool("json", false, "print the result as JSON")
	ns := c.Flags().String("namespace", "", "namespace of the experiences (default: each where it is found)")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return experiencesPurge(ctx, g, fs, pos, asJSON, ns)
	})
}

// experiencesPurge is `hindsight experiences purge ID…`: experiences
// removed for good, not forgotten.
func experiencesPurge(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON *bool, ns *string) error {
	if len(pos) == 0 {
		fs.Usage()
		return usageErr("experiences purge takes experience ids")
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	res, err := purgeExperiences(ctx, c, *ns, pos, newBar(g.quiet, "purging experiences", len(pos)))
	if q := (*daemon.QueuedError)(nil); errors.As(err, &q) {
		return printQueued(*asJSON, q)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "purged %d experience(s)%s\n", len(res.Purged), list(res.Purged))
	return nil
}

// purgeBatch is how many experiences one purge request names.
const purgeBatch = 100

// purgeExperiences purges ids in requests of purgeBatch, advancing b by
// each request's share.
func purgeExperiences(ctx context.Context, c *daemon.Client, ns string, ids []string, b *bar) (daemon.PurgeResult, error) {
	defer b.finish()
	res := daemon.PurgeResult{Purged: []string{}}
	var queued *daemon.QueuedError
	for chunk := range slices.Chunk(ids, purgeBatch) {
		r, err := c.PurgeExperiences(ctx, ns, chunk)
		if q := (*daemon.QueuedError)(nil); errors.As(err, &q) {
			// The store is unreachable: this chunk waits in the daemon's
			// queue, and so will the next ones, in order.
			queued = q
			b.add(len(chunk))
			continue
		}
		if err != nil {
			return res, fmt.Errorf("purge experiences: %w", err)
		}
		res.Purged = append(res.Purged, r.Purged...)
		b.add(len(chunk))
	}
	if queued != nil {
		return res, queued
	}
	return res, nil
}

func list(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ": " + guard.Printable(strings.Join(ids, " "))
}

// parseBefore reads a date (2006-01-02, local midnight), an RFC 3339 time,
// or a duration before now.
func parseBefore(s string, now time.Time) (time.Time, error) {
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a date (2006-01-02), an RFC 3339 time or a duration", s)
}
