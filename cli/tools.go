package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hindsight-proxy/hindsight/guard"
	"github.com/hindsight-proxy/hindsight/toolpin"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func toolsCmd(g *globals) *cobra.Command {
	list := leaf("list [SERVER] [--json]", "the tools each server listed: pinned, changed or flagged",
		"  hindsight tools list\n  hindsight tools list github --json")
	asJSON := list.Flags().Bool("json", false, "print JSON: one object per server, with every tool's versions")
	approve := leaf("approve SERVER TOOL…", "pin the version of a tool last listed, so a sidecar with --pin-tools lets it through",
		"  hindsight tools approve github create_issue")
	return group("tools", "the tools servers list, pinned by hash", "  hindsight tools list\n  hindsight tools approve github create_issue",
		runs(list, func(ctx context.Context, _ *pflag.FlagSet, pos []string) error { return runToolsList(g, pos, *asJSON) }),
		runs(approve, func(ctx context.Context, _ *pflag.FlagSet, pos []string) error { return runToolsApprove(g, pos) }))
}

// runToolsList prints every tool of every server (or of the one named) with
// its state: pinned, changed (since the version approved) or flagged (its
// description fails validation and no version was approved).
func runToolsList(g *globals, pos []string, asJSON bool) error {
	if len(pos) > 1 {
		return usageErr("tools list takes at most one server")
	}
	files, err := toolpin.List(g.home)
	if err != nil && len(files) == 0 {
		return err
	}
	if len(pos) == 1 {
		kept := files[:0]
		for _, f := range files {
			if f.Server == pos[0] {
				kept = append(kept, f)
			}
		}
		if files = kept; len(files) == 0 {
			return fmt.Errorf("tools list: %w: no tool of server %q was listed through a sidecar here", toolpin.ErrUnknownTool, pos[0])
		}
	}
	if asJSON {
		return printJSON(stdout, files)
	}
	t := newTable(stdout, "SERVER", "TOOL", "STATE", "PINNED", "CURRENT", "SINCE", "WHY")
	for _, f := range files {
		for _, name := range f.Names() {
			tl := f.Tools[name]
			why := tl.Flag
			if tl.State() == toolpin.StatePinned && tl.ApprovedBy != "" {
				why = "approved: " + tl.ApprovedBy
				if tl.Flag != "" {
					why += " (despite " + tl.Flag + ")"
				}
			}
			pinned := toolpin.Short(tl.Approved)
			if pinned == "" {
				pinned = "-"
			}
			t.row(f.Server, name, tl.State(), pinned, toolpin.Short(tl.Current), when(tl.SeenAt), clip(why, 80))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	return err
}

// runToolsApprove pins the current version of each tool named.
func runToolsApprove(g *globals, pos []string) error {
	if len(pos) < 2 {
		return usageErr("tools approve needs SERVER and TOOL")
	}
	server := pos[0]
	var errs []error
	for _, name := range pos[1:] {
		tl, err := toolpin.Approve(g.home, server, name, time.Now())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(stdout, "approved %s %s at %s\n", guard.Printable(server), guard.Printable(name), toolpin.Short(tl.Current))
	}
	return errors.Join(errs...)
}
