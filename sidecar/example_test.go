package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/capture"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/hindsight-proxy/hindsight/inject"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/sidecar"
	"github.com/hindsight-proxy/hindsight/spool"
)

// A daemon short of disk space answers a batch with daemon.ErrDiskFull; the
// outbox reads it as spool.ErrDaemonFull and tries again within a second.
func ExampleSpoolError() {
	err := sidecar.SpoolError(fmt.Errorf("deliver: %w", daemon.ErrDiskFull))
	fmt.Println(errors.Is(err, spool.ErrDaemonFull), errors.Is(err, daemon.ErrDiskFull))
	fmt.Println(sidecar.SpoolError(nil))
	// Output:
	// true true
	// <nil>
}

// What `hindsight wrap --name fs -- npx -y @modelcontextprotocol/server-filesystem .`
// runs: the agent on stdin and stdout, the server a child, every call
// recorded and lessons given back.
func ExampleRunStdio() {
	cfg := sidecar.Config{
		Home:    hindsight.DefaultHome(),
		Server:  "fs",
		Logger:  slog.Default(),
		Capture: &capture.Options{},
		EndTask: true,
		Inject:  &inject.Injector{EndTaskTool: true},
	}
	st := &proxy.Stdio{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "."}}
	if err := sidecar.RunStdio(context.Background(), cfg, st, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
