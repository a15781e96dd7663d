package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/hindsight-proxy/hindsight/internal/profile"
	"github.com/hindsight-proxy/hindsight/internal/safelog"
	"github.com/hindsight-proxy/hindsight/proxy"
	"github.com/hindsight-proxy/hindsight/sidecar"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pinToolsUsage is the help of wrap's and serve's --pin-tools.
const pinToolsUsage = "withhold a tool whose name, description or schema changed since it was pinned, or whose description fails validation, until `hindsight tools approve SERVER TOOL` (default: tools.pin; without it such tools are only reported)"

func wrapCmd(g *globals) *cobra.Command {
	c := leaf("wrap [--name N] [--namespace NS] [--grace D] [--pin-tools] -- CMD [ARGS…]", "stdio sidecar in front of a server command",
		"  hindsight wrap --name fs -- npx -y @modelcontextprotocol/server-filesystem .\n  hindsight wrap -- node server.js --port 0 -v")
	fs := c.Flags()
	// The server's command line is the child's whole: flags stop at the
	// first argument that is not one of wrap's, or at --.
	fs.SetInterspersed(false)
	name := fs.String("name", "", "the server's name in traces and logs (default: the command's base name)")
	fs.StringVar(&g.namespace, "namespace", "", "namespace of this server's lessons (stored and injected), overriding store.namespaces")
	fs.BoolVar(&g.pinTools, "pin-tools", false, pinToolsUsage)
	grace := fs.Duration("grace", proxy.DefaultGracePeriod, "how long the server may take to exit after stdin closes, and after SIGTERM")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, cmdline []string) error {
		return runWrap(ctx, g, fs, cmdline, name, grace)
	})
}

// runWrap is `hindsight wrap [--name N] -- CMD [ARGS…]`: the stdio sidecar.
// The agent host starts it in place of the server's command; it starts the
// server as a child and relays the protocol on stdin and stdout. Logs go to
// $HINDSIGHT_HOME/logs/wrap-NAME.log.
func runWrap(ctx context.Context, g *globals, fs *pflag.FlagSet, cmdline []string, name *string, grace *time.Duration) error {
	if len(cmdline) == 0 {
		fs.Usage()
		return fmt.Errorf("%w: wrap needs the server's command after --", errUsage)
	}
	if *name == "" {
		*name = filepath.Base(cmdline[0])
	}
	*name = redactName(g, *name)
	// Hindsight's own trouble must not cost the agent its server: without
	// a log file the sidecar logs to stderr, and without capture and
	// injection it still relays.
	logger, closer, err := openLog(g, "wrap-"+*name)
	if err != nil {
		red, _ := logRedactor(g)
		logger = slog.New(safelog.NewHandler(slog.NewTextHandler(os.Stderr, nil), red, safelog.Options{}))
		logger.Error("cannot open the log file; logging to stderr", "err", err)
	} else {
		defer closer.Close()
		slog.SetDefault(logger) // libraries' logs go through the redactor into the file too
	}
	tracingElsewhere(g.config.Telemetry, logger)

	// A broken stdout must surface as EPIPE, not kill the sidecar before it
	// stops its child. (A caught signal, unlike an ignored one, is reset
	// for the child on exec.)
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)

	stopProfiles, err := startProfiles(logger)
	if err != nil {
		return err
	}
	defer stopProfiles()

	if os.Getenv("GOGC") == "" && !g.config.captureEnabled() {
		// Relaying only, the live heap is small and the collector's
		// minimum target makes it run every few thousand calls: twice the
		// headroom costs a few MB and saves relay CPU (lab/bench/README.md).
		// With capture the heap is larger and the default serves better.
		debug.SetGCPercent(200)
	}

	st := &proxy.Stdio{Command: cmdline[0], Args: cmdline[1:], GracePeriod: *grace, TaskID: envTaskID()}
	return sidecar.RunStdio(ctx, sidecarConfig(g, *name, logger), st, os.Stdin, os.Stdout)
}

// writeHeapProfile writes a heap profile of the sidecar to path
// (HINDSIGHT_MEMPROFILE, for measuring its memory): run at exit, its
// alloc_space shows everything allocated while it ran, its inuse_space
// what the last garbage collection kept.
func writeHeapProfile(path string, logger *slog.Logger) {
	f, err := os.Create(path)
	if err != nil {
		logger.Error("create heap profile", "err", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		logger.Error("write heap profile", "err", err)
	}
}

// watchHeap writes a heap profile to path each time the heap in use
// grows by a quarter over the one when it last wrote, so that path holds a
// profile from near the heap's peak; stop ends it and writes the Go
// runtime's memory figures to path+".txt" (HINDSIGHT_MEMPROFILE).
func watchHeap(path string, logger *slog.Logger) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		var last uint64
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				line := fmt.Sprintf("heap_inuse_mb=%d heap_sys_mb=%d heap_released_mb=%d sys_mb=%d peak_profiled_inuse_mb=%d gcs=%d\n",
					ms.HeapInuse>>20, ms.HeapSys>>20, ms.HeapReleased>>20, ms.Sys>>20, last>>20, ms.NumGC)
				logger.Info("heap at exit: " + strings.TrimSpace(line))
				if err := os.WriteFile(path+".txt", []byte(line), 0o600); err != nil {
					logger.Error("write heap summary", "err", err)
				}
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > last+last/4 {
				last = ms.HeapInuse
				writeHeapProfile(path, logger)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// logName makes a server name safe as part of a file name.
func logName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
}

// startProfiles starts the profiles the environment asks for, for
// measuring a sidecar: a CPU profile to $HINDSIGHT_CPUPROFILE, and heap
// profiles to $HINDSIGHT_MEMPROFILE (written at exit), PATH.peak (near the
// peak of the heap) and PATH.peak.txt (the runtime's memory figures at
// exit). stop writes them.
func startProfiles(logger *slog.Logger) (stop func(), err error) {
	var stops []func()
	if path := os.Getenv("HINDSIGHT_CPUPROFILE"); path != "" {
		stopCPU, err := profile.StartCPU(path)
		if err != nil {
			return nil, err
		}
		stops = append(stops, stopCPU)
	}
	if path := os.Getenv("HINDSIGHT_MEMPROFILE"); path != "" {
		stopWatch := watchHeap(path+".peak", logger)
		stops = append(stops, stopWatch, func() { writeHeapProfile(path, logger) })
	}
	return func() {
		for _, f := range stops {
			f()
		}
	}, nil
}
