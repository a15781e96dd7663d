package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newRoot builds the command tree. started reports whether a command
// began to run: an error before that is the command line's.
func newRoot() (root *cobra.Command, started *bool) {
	g := &globals{}
	var home, cfgFile string
	started = new(bool)
	root = &cobra.Command{
		Use:   "hindsight",
		Short: "a sidecar proxy that records MCP tool calls and gives agents the lessons learnt",
		Example: `  hindsight demo
  hindsight wrap --name fs -- npx -y @modelcontextprotocol/server-filesystem .
  hindsight traces list --home ~/.hindsight-test`,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command: the usage, and exit status 2.
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			_ = c.Usage()
			return usageErr("no command")
		},
		PersistentPreRunE: func(c *cobra.Command, args []string) error {
			*started = true
			if !needsGlobals(c) {
				return nil
			}
			return g.resolve(home, cfgFile)
		},
	}
	root.SetVersionTemplate("hindsight {{.Version}}\n")
	// The root and the groups run only to report a missing command: their
	// usage shows "COMMAND [command]" alone.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(),
		"{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		_ = c.Usage()
		return usageErr("%v", err)
	})
	pf := root.PersistentFlags()
	pf.StringVar(&home, "home", "", "Hindsight's directory (default $HINDSIGHT_HOME, else ~/.hindsight)")
	pf.StringVar(&cfgFile, "config", "", "YAML configuration file (default $HINDSIGHT_HOME/config.yaml if present)")
	pf.BoolVarP(&g.quiet, "quiet", "q", false, "no progress bars or informational messages on stderr (errors still)")
	root.AddCommand(
		demoCmd(g), exampleServerCmd(g),
		wrapCmd(g), serveCmd(g), mcpCmd(g), daemonCmd(g), uiCmd(g), statusCmd(g), toolsCmd(g),
		group("traces", "recorded tasks and their steps", "  hindsight traces list --open\n  hindsight traces show TASK",
			tracesListCmd(g), tracesShowCmd(g), tracesExportCmd(g), tracesImportCmd(g), tracesPurgeCmd(g)),
		group("experiences", "the lessons learnt", "  hindsight experiences list\n  hindsight experiences search \"permission denied\" --tool write_file",
			experiencesListCmd(g), experiencesSearchCmd(g),
			changeOneCmd(g, "forget"), changeOneCmd(g, "restore"), changeOneCmd(g, "pin"), changeOneCmd(g, "unpin"),
			experiencesPurgeCmd(g), experiencesImportCmd(g), experiencesExportCmd(g), experiencesRejectedCmd(g)),
		group("replay", "answer or check a server from recorded steps", "  hindsight replay serve --task TASK\n  hindsight replay verify --task TASK -- node server.js",
			replayServeCmd(g), replayVerifyCmd(g)),
		reflectCmd(g), evalCmd(g), versionCmd(),
		installCmd(g, "install"), installCmd(g, "uninstall"),
	)
	return root, started
}

// needsGlobals reports whether c reads the home and configuration: help,
// version and shell completion do not, and so work with a broken
// configuration.
func needsGlobals(c *cobra.Command) bool {
	switch c.Name() {
	case "help", "version", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return false
	}
	return !c.HasParent() || c.Parent().Name() != "completion"
}

// leaf returns a command with its help text; the caller declares its
// flags and sets RunE. Its flag set's Usage prints the command's usage
// on stderr, as bodies do before a usage error.
func leaf(use, short, example string) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Example: example, DisableFlagsInUseLine: true}
	c.Flags().Usage = func() { _ = c.Usage() }
	return c
}

// runs sets c to run body with the command's context and its positional
// arguments.
func runs(c *cobra.Command, body func(ctx context.Context, fs *pflag.FlagSet, pos []string) error) *cobra.Command {
	c.RunE = func(c *cobra.Command, pos []string) error { return body(c.Context(), c.Flags(), pos) }
	return c
}

// group is a command of subcommands; alone, or with an unknown
// subcommand, it prints its usage and fails with exit status 2.
func group(name, short, example string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: name, Short: short, Example: example, Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			_ = c.Usage()
			if len(args) == 0 {
				return usageErr("%s needs a subcommand", name)
			}
			return usageErr("%s: unknown subcommand %q", name, args[0])
		}}
	c.AddCommand(subs...)
	return c
}
