package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/demo"
	"github.com/hindsight-proxy/hindsight/internal/exampleserver"
)

// runDemo is `hindsight demo [--home DIR] [--json]`: the learning demo on
// the embedded default, with no network and no configuration. Without
// --home (the global option, or the demo's own) it works in a temporary
// directory it removes afterwards.
func runDemo(ctx context.Context, g *globals, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	home := fs.String("home", "", "keep the demo's daemon data in DIR (default: a temporary directory, removed afterwards)")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of the transcript")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: hindsight demo [--home DIR] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: demo takes no arguments", errUsage)
	}
	dir := *home
	if dir == "" && os.Getenv("HINDSIGHT_HOME") != "" && homeFlagGiven() {
		dir = string(g.home)
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

// homeFlagGiven reports whether the global --home option was on the
// command line (it sets HINDSIGHT_HOME for children).
func homeFlagGiven() bool {
	for _, a := range os.Args[1:] {
		if a == "--home" || a == "-home" || len(a) > 7 && (a[:7] == "--home=" || a[:6] == "-home=") {
			return true
		}
		if a == "demo" {
			return false
		}
	}
	return false
}

// runExampleServer is `hindsight example-server`: the demo's example MCP
// server on stdio.
func runExampleServer(ctx context.Context, g *globals, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: example-server takes no arguments", errUsage)
	}
	return exampleserver.Serve(ctx, os.Stdin, os.Stdout)
}
