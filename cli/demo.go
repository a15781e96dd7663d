package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/demo"
	"github.com/hindsight-proxy/hindsight/demo/exampleserver"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func demoCmd(g *globals) *cobra.Command {
	c := leaf("demo [--home DIR] [--json]", "run the learning demo on the embedded default", "  hindsight demo\n  hindsight demo --json --home /tmp/hs-demo")
	// The demo's own --home, before or after "demo", in place of the
	// global one: without it the demo works in a temporary directory.
	home := c.Flags().String("home", "", "keep the demo's daemon data in DIR (default: a temporary directory, removed afterwards)")
	asJSON := c.Flags().Bool("json", false, "print the result as JSON instead of the transcript")
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, pos []string) error {
		return runDemo(ctx, g, pos, home, asJSON)
	})
}

// runDemo is `hindsight demo [--home DIR] [--json]`: the learning demo on
// the embedded default, with no network and no configuration. Without
// --home it works in a temporary directory it removes afterwards.
func runDemo(ctx context.Context, g *globals, pos []string, home *string, asJSON *bool) error {
	if len(pos) > 0 {
		return fmt.Errorf("%w: demo takes no arguments", errUsage)
	}
	dir := *home
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fmt.Errorf("resolve home: %w", err)
		}
		dir = abs
	}
	if dir == "" {
		// Short: the daemon's Unix socket path must fit in 107 bytes.
		tmp, err := os.MkdirTemp("", "hsdemo-")
		if err != nil {
			return fmt.Errorf("create demo home: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	// No network unless an LLM is configured for Hindsight explicitly: the
	// generic OpenAI variables alone do not send the demo's traces anywhere.
	if os.Getenv("HINDSIGHT_LLM_BASE_URL") == "" {
		os.Unsetenv("OPENAI_BASE_URL")
		os.Unsetenv("OPENAI_API_KEY")
	}
	var out io.Writer = os.Stdout
	if *asJSON {
		out = nil
	} else {
		fmt.Fprintf(out, "Hindsight demo — home %s\n", dir)
	}
	res, err := demo.Demo(ctx, demo.Options{Home: hindsight.Home(dir), Exe: exe, Out: out})
	if *asJSON && res != nil {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

func exampleServerCmd(g *globals) *cobra.Command {
	c := leaf("example-server", "the demo's example MCP server on stdio (used by demo)", "  hindsight wrap -- hindsight example-server")
	c.Hidden = true
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, args []string) error {
		return runExampleServer(ctx, g, args)
	})
}

// runExampleServer is `hindsight example-server`: the demo's example MCP
// server on stdio.
func runExampleServer(ctx context.Context, g *globals, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: example-server takes no arguments", errUsage)
	}
	return exampleserver.Serve(ctx, os.Stdin, os.Stdout)
}
