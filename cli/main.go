// Package cli is the hindsight command line: the command tree, the
// configuration, and every command. Both binaries run it: cmd/hindsight
// (the lean build, without the Weaviate and OpenAI-compatible clients) and
// cmd/hindsightd (every backend); see Backends.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hindsight-proxy/hindsight/guard"
)

// errUsage marks an error caused by a bad command line (exit status 2).
var errUsage = errors.New("usage")

// Main runs the command named by os.Args with the given backends and exits.
func Main(b Backends) {
	backends = b
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit status: 0, 1 when
// the command failed, 2 when the command line was wrong.
func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	root, started := newRoot()
	root.SetArgs(append([]string{}, args...)) // not nil: cobra would read os.Args
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(errOut, "hindsight:", guard.Printable(err.Error()))
	// An error before the command started is the command line's: an
	// unknown command or flag, a flag's bad value.
	if errors.Is(err, errUsage) || !*started {
		return 2
	}
	return 1
}
