// Package cli is the hindsight command line: the command table, the
// configuration, and every command. Both binaries run it: cmd/hindsight
// (the lean build, without the Weaviate and OpenAI-compatible clients) and
// cmd/hindsightd (every backend); see Backends.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand. run receives the arguments after the
// subcommand's name and the global options.
type command struct {
	summary string
	run     func(ctx context.Context, g *globals, args []string) error
}

// commands is the command table. Each group lives in a file of its own.
var commands = map[string]command{
	"demo":        {"run the learning demo on the embedded default", runDemo},
	"wrap":        {"stdio sidecar in front of a server command: wrap [--name N] -- CMD [ARGS…]", runWrap},
	"serve":       {"HTTP sidecar: serve --listen ADDR --upstream URL | -- CMD", runServe},
	"mcp":         {"the memory as an MCP server (store_episode, trigger_hindsight, query_hindsight…): mcp [--listen ADDR]", runMCP},
	"daemon":      {"run the daemon in the foreground", runDaemon},
	"ui":          {"open the web UI (tasks, steps, experiences): ui [--no-open]", runUI},
	"status":      {"daemon health, outbox depths, reflection queue, store sizes", runStatus},
	"traces":      {"traces list | show TASK | export | import FILE", runTraces},
	"experiences": {"experiences list | search QUERY | forget ID | restore ID | pin ID | unpin ID | import FILE | export", runExperiences},
	"replay":      {"answer or check a server from recorded steps: replay serve | verify (--task ID | --file FILE)", runReplay},
	"reflect":     {"run reflection now: reflect [--pending] [--task ID]", runReflect},
	"eval":        {"learn from half of recorded tasks, replay the other half's failures: eval [--json] FILE|DIR", runEval},
	"version":     {"print the version", runVersion},
	"install":     {"wrap the stdio servers of MCP clients' configs: install [--client C] [--dry-run] [--json]", runInstall},
	"uninstall":   {"undo install, restoring each config: uninstall [--client C] [--dry-run]", runUninstall},

	"example-server": {"the demo's example MCP server on stdio (used by demo)", runExampleServer},
}

// errUsage marks an error caused by a bad command line (exit status 2).
var errUsage = errors.New("usage")

// Main runs the command named by os.Args with the given backends and exits.
func Main(b Backends) {
	backends = b
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "hindsight:", err)
		}
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	g, rest, err := parseGlobals(args, stderr)
	if err != nil {
		return err
	}
	if len(rest) == 0 || rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help" {
		usage(stderr)
		if len(rest) == 0 {
			return fmt.Errorf("%w: no command", errUsage)
		}
		return nil
	}
	cmd, ok := commands[rest[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("%w: unknown command %q", errUsage, rest[0])
	}
	return cmd.run(ctx, g, rest[1:])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: hindsight [--home DIR] [--config FILE] COMMAND [ARGS…]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
}

// version is set at build time with
// -ldflags "-X github.com/hindsight-proxy/hindsight/internal/cli.version=…".
var version = "dev"

func runVersion(ctx context.Context, g *globals, args []string) error {
	fmt.Println("hindsight", version)
	return nil
}
