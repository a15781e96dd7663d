package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hindsight-proxy/hindsight/install"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// installFlags are the options install and uninstall share.
type installFlags struct {
	client, project, configDir, exe string
	dryRun, json                    bool
}

// installCmd is `hindsight install` or, with verb uninstall, its undoing.
func installCmd(g *globals, verb string) *cobra.Command {
	c := leaf("uninstall [--client NAME[,NAME…]|all] [--project DIR] [--config-dir DIR] [--dry-run] [--json]",
		"undo install, restoring each config", "  hindsight uninstall --dry-run\n  hindsight uninstall --client claude-code")
	run := runUninstall
	if verb == "install" {
		c = leaf("install [--client NAME[,NAME…]|all] [--project DIR] [--config-dir DIR] [--hindsight PATH] [--dry-run] [--json]",
			"wrap the stdio servers of MCP clients' configs", "  hindsight install --dry-run\n  hindsight install --client cursor,vscode --project .")
		run = runInstall
	}
	o := installFlagSet(c.Flags(), verb)
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, rest []string) error {
		if len(rest) > 0 {
			return usageErr("%s takes no arguments, got %q", verb, rest)
		}
		return run(ctx, g, o)
	})
}

// installFlagSet declares the flags of install (or uninstall) on fs.
func installFlagSet(fs *pflag.FlagSet, verb string) *installFlags {
	o := &installFlags{}
	fs.StringVar(&o.client, "client", "all", "which clients: "+strings.Join(install.Clients, ", ")+", or all")
	fs.StringVar(&o.project, "project", ".", "the project whose .mcp.json, .cursor/mcp.json and .vscode/mcp.json to include (\"\" for none)")
	fs.StringVar(&o.configDir, "config-dir", "", "look for user configurations under DIR instead of the home directory (ignores XDG_CONFIG_HOME, APPDATA, CODEX_HOME, CLAUDE_CONFIG_DIR)")
	if verb == "install" {
		fs.StringVar(&o.exe, "hindsight", "", "the hindsight command written into the configurations (default: the absolute path of hindsight on PATH when that is this program, else of this program)")
	}
	fs.BoolVar(&o.dryRun, "dry-run", false, "show what would change, write nothing")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	return o
}

// locations finds the configuration files the flags select.
func (o *installFlags) locations() ([]install.Location, []install.Location, error) {
	clients, err := install.ParseClients(o.client)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	project := o.project
	if project != "" {
		if project, err = filepath.Abs(project); err != nil {
			return nil, nil, fmt.Errorf("find project: %w", err)
		}
	}
	env := installEnv(project)
	if o.configDir != "" {
		dir, err := filepath.Abs(o.configDir)
		if err != nil {
			return nil, nil, fmt.Errorf("find config dir: %w", err)
		}
		env = install.Env{GOOS: env.GOOS, Home: dir, Project: project}
	}
	return env.Find(clients), env.Candidates(clients), nil
}

// hindsightCommand is the command install writes: "hindsight" as found on
// PATH when that is this very program (a stable path, such as a package
// manager's symlink, that survives upgrades), else the absolute path of
// this program. MCP clients started from a desktop often lack the shell's
// PATH, so the path written is always absolute.
func hindsightCommand() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	if p, err := exec.LookPath("hindsight"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			a, errA := os.Stat(abs)
			b, errB := os.Stat(exe)
			if errA == nil && errB == nil && os.SameFile(a, b) {
				return abs, nil
			}
		}
	}
	return exe, nil
}

// runInstall is `hindsight install`: it rewrites every stdio MCP server in
// the selected clients' configurations to run through `hindsight wrap`,
// keeping a backup of each file it changes (see package install).
func runInstall(ctx context.Context, g *globals, o *installFlags) error {
	var err error
	if o.exe == "" {
		if o.exe, err = hindsightCommand(); err != nil {
			return err
		}
	} else if !install.IsHindsight(o.exe) {
		// Entries are known to be wrapped by their command's name.
		return usageErr("--hindsight %q: the program's name must be hindsight (or start with hindsight-)", o.exe)
	}
	locs, looked, err := o.locations()
	if err != nil {
		return err
	}
	res := install.Install(locs, install.Options{Exe: o.exe, DryRun: o.dryRun})
	return report(stdout, "install", o, res, looked)
}

// runUninstall is `hindsight uninstall`: it undoes install, restoring each
// file's backup when the file is unchanged since, else unwrapping only the
// entries install wrapped.
func runUninstall(ctx context.Context, g *globals, o *installFlags) error {
	locs, looked, err := o.locations()
	if err != nil {
		return err
	}
	res := install.Uninstall(locs, install.Options{DryRun: o.dryRun})
	return report(stdout, "uninstall", o, res, looked)
}

// report prints the results and returns an error when a file failed.
func report(w io.Writer, verb string, o *installFlags, res []install.Result, looked []install.Location) error {
	failed := 0
	for _, r := range res {
		if r.Err != "" {
			failed++
		}
	}
	var err error
	if failed > 0 {
		err = fmt.Errorf("%s: %d of %d files left untouched", verb, failed, len(res))
	}
	if o.json {
		out := struct {
			DryRun    bool             `json:"dry_run"`
			Hindsight string           `json:"hindsight,omitempty"`
			Files     []install.Result `json:"files"`
		}{o.dryRun, o.exe, res}
		if out.Files == nil {
			out.Files = []install.Result{}
		}
		if perr := printJSON(w, out); perr != nil {
			return perr
		}
		return err
	}
	if len(res) == 0 {
		fmt.Fprintln(w, "no MCP client configuration found; looked for:")
		for _, l := range looked {
			fmt.Fprintf(w, "  %-14s %-7s %s\n", l.Client, l.Scope, l.Path)
		}
		return nil
	}
	var hints []install.ServerResult
	for i, r := range res {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s (%s) %s: %s\n", r.Client, r.Scope, r.Path, describe(verb, r, o.dryRun))
		if r.Err != "" {
			fmt.Fprintf(w, "  error: %s\n", r.Err)
			continue
		}
		t := newTable(w)
		for _, s := range r.Servers {
			where := ""
			if s.Where != "mcpServers" && s.Where != "servers" && s.Where != "mcp_servers" {
				where = " in " + s.Where
			}
			t.row("  "+s.Name+where, s.Transport, s.Status)
			if s.Hint != "" {
				hints = append(hints, s)
			}
		}
		t.flush()
		if r.Diff != "" {
			fmt.Fprint(w, r.Diff)
		}
	}
	if verb == "install" && len(hints) > 0 {
		fmt.Fprintln(w, "\nHTTP servers are left as they are; to record them, run an HTTP sidecar in front of each")
		fmt.Fprintln(w, "(it is yours to keep running; install starts none) and point the entry at it:")
		for i, s := range hints {
			port := fmt.Sprint(8931 + i)
			fmt.Fprintf(w, "  %s: %s\n", s.Name, strings.ReplaceAll(s.Hint, "PORT", port))
		}
	}
	if o.dryRun {
		fmt.Fprintln(w, "\ndry run: nothing was written")
	}
	return err
}

// describe is a result's action in words.
func describe(verb string, r install.Result, dry bool) string {
	would := func(s string) string {
		if dry {
			return "would " + s
		}
		return s
	}
	switch r.Action {
	case install.ActionWrap:
		n := 0
		for _, s := range r.Servers {
			if s.Status == install.StatusWrapped {
				n++
			}
		}
		return would(fmt.Sprintf("wrap %d server(s); backup %s", n, r.Backup))
	case install.ActionRestore:
		return would("restore the backup (unchanged since install) and remove it")
	case install.ActionUnwrap:
		return would("unwrap the servers install wrapped (the file was edited since) and remove the backup")
	case install.ActionError:
		return "left untouched"
	}
	if verb == "uninstall" {
		return "nothing installed here"
	}
	return "nothing to change"
}
