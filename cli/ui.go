package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/hindsight-proxy/hindsight"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func uiCmd(g *globals) *cobra.Command {
	c := leaf("ui [--no-open]", "open the web UI (tasks, steps, experiences)", "  hindsight ui\n  hindsight ui --no-open")
	noOpen := c.Flags().Bool("no-open", false, "print the URL without opening a browser")
	return runs(c, func(ctx context.Context, _ *pflag.FlagSet, pos []string) error { return runUI(ctx, g, pos, noOpen) })
}

// runUI starts the daemon's web UI unless it runs (starting the daemon
// too), prints its URL with the token of this start, and opens it in the
// browser unless --no-open.
func runUI(ctx context.Context, g *globals, pos []string, noOpen *bool) error {
	if len(pos) > 0 {
		return fmt.Errorf("%w: ui takes no arguments", errUsage)
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	u, err := c.UI(ctx)
	if errors.Is(err, hindsight.ErrNotFound) {
		return fmt.Errorf("start web ui: the running daemon is older and serves none; restart it (kill its process, the next command starts a new one): %w", err)
	}
	if err != nil {
		return fmt.Errorf("start web ui: %w", err)
	}
	fmt.Println(u)
	if !*noOpen {
		if err := openBrowser(u); err != nil {
			fmt.Fprintf(os.Stderr, "hindsight: open a browser: %v; open the URL above yourself\n", err)
		}
	}
	return nil
}

// openBrowser opens u with $BROWSER, else the platform's opener.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch b := os.Getenv("BROWSER"); {
	case b != "":
		cmd = exec.Command(b, u)
	case runtime.GOOS == "darwin":
		cmd = exec.Command("open", u)
	case runtime.GOOS == "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", cmd.Path, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
