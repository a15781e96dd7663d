package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Main runs a measuring command: run with the command's arguments until it
// returns or an interrupt cancels its context, then exits 1 on an error
// (printed after name, unless it is -h's flag.ErrHelp).
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, name+":", err)
		}
		os.Exit(1)
	}
}

// ParseCounts parses a comma-separated list of positive numbers.
func ParseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// BuildHindsight builds ./cmd/hindsight into dir and returns its path. Run
// from the module's root.
func BuildHindsight(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "hindsight")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/hindsight")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ./cmd/hindsight (run from the module's root, or pass -hindsight): %w\n%s", err, b)
	}
	return out, nil
}

// Workspace makes a temporary directory named after prefix for a
// benchmark's homes and returns it with the hindsight binary to measure:
// bin when set, else one built from ./cmd/hindsight into it. cleanup
// removes the directory unless keep is set.
func Workspace(ctx context.Context, prefix, bin string, keep bool, stderr io.Writer) (dir, exe string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", "", nil, fmt.Errorf("create temp dir: %w", err)
	}
	cleanup = func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}
	exe = bin
	if exe == "" {
		fmt.Fprintln(stderr, "building ./cmd/hindsight …")
		if exe, err = BuildHindsight(ctx, dir); err != nil {
			cleanup()
			return "", "", nil, err
		}
	}
	return dir, exe, cleanup, nil
}
