//go:build linux

// Command servebench measures what `hindsight serve -- CMD` costs agents
// over Streamable HTTP: many clients, one session and one stdio echo child
// each, through a minimal Go bridge that records nothing (the floor) and
// through the sidecar, interleaved in one run. It prints a Markdown table
// and the same-round ratios against the floor.
//
// Usage:
//
//	servebench [flags]                          run the comparison (from the module's root)
//	servebench echo                             be the echo MCP server on stdin/stdout
//	servebench bridge -listen ADDR -- CMD [ARGS] be the floor in front of CMD
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/lab/bench"
)

// Variant names.
const (
	floor            = "bridge"
	serve            = "serve"
	serveNoCapture   = "serve-nocapture"
	defaultVariants  = floor + "," + serve
	variantsAccepted = floor + ", " + serve + " or " + serveNoCapture
)

func main() { bench.Main("servebench", dispatch) }

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "echo":
			return bench.ServeEcho(os.Stdin, os.Stdout)
		case "bridge":
			return bridge(ctx, args[1:], stderr)
		}
	}
	return run(ctx, args, stdout, stderr)
}

// bridge serves the floor until ctx is done.
func bridge(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("servebench bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("bridge: no command (bridge -listen ADDR -- CMD [ARGS])")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	b := &bench.Bridge{Argv: fs.Args()}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err = srv.Serve(ln)
	b.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve: %w", err)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("servebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		rounds   = fs.Int("rounds", 3, "interleaved rounds (medians are taken over them)")
		clients  = fs.Int("clients", 50, "sessions, each one client with one call in flight")
		calls    = fs.Int("calls", 100, "echo calls per client")
		payload  = fs.Int("payload", 256, "bytes of text in each echo call")
		variants = fs.String("variants", defaultVariants, "variants to measure, the floor first ("+variantsAccepted+")")
		bin      = fs.String("hindsight", "", "hindsight binary (default: build ./cmd/hindsight)")
		profDir  = fs.String("cpuprofile", "", "write each serve variant's CPU profile to DIR/VARIANT-ROUND.pprof (HINDSIGHT_CPUPROFILE)")
		verbose  = fs.Bool("v", false, "print every measurement to stderr")
		compare  = map[string]string{}
	)
	fs.Func("compare", "NAME=BINARY: also measure `serve` of another build, as variant NAME (repeatable)", func(v string) error {
		name, bin, ok := strings.Cut(v, "=")
		if !ok || name == "" || bin == "" || isVariant(name) {
			return fmt.Errorf("want NAME=BINARY with a NAME of its own, got %q", v)
		}
		compare[name] = bin
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := strings.Split(*variants, ",")
	for _, n := range names {
		if !isVariant(n) {
			return fmt.Errorf("unknown variant %q (want %s)", n, variantsAccepted)
		}
	}
	for name := range compare {
		names = append(names, name)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	tmp, exe, cleanup, err := bench.Workspace(ctx, "servebench-", *bin, false, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	var vs []bench.FrontVariant
	for _, n := range names {
		v := bench.FrontVariant{Name: n}
		if n == floor {
			v.Argv = []string{self, "bridge", "-listen", bench.AddrArg, "--", self, "echo"}
		} else {
			exe := exe
			if b, ok := compare[n]; ok {
				exe = b
			}
			v.Argv = []string{exe, "serve", "--listen", bench.AddrArg, "--name", "echo",
				"--max-children", strconv.Itoa(*clients), "--", self, "echo"}
			v.Home = filepath.Join(tmp, "home-"+n)
			if n == serveNoCapture {
				v.Env = append(v.Env, "HINDSIGHT_CAPTURE=off")
			}
			if *profDir != "" {
				abs, err := filepath.Abs(*profDir)
				if err != nil {
					return fmt.Errorf("resolve -cpuprofile: %w", err)
				}
				if err := os.MkdirAll(abs, 0o755); err != nil {
					return fmt.Errorf("create profile directory: %w", err)
				}
				v.Env = append(v.Env, "HINDSIGHT_CPUPROFILE="+filepath.Join(abs, n+".pprof"))
			}
		}
		vs = append(vs, v)
	}
	opts := bench.FrontOptions{Variants: vs, Rounds: *rounds, Clients: *clients, Calls: *calls, Payload: *payload}
	if *verbose {
		opts.Progress = stderr
	}
	rep, err := bench.RunFront(ctx, opts)
	for _, v := range vs {
		if v.Home != "" {
			if e := bench.StopDaemons(v.Home, 15*time.Second); e != nil && err == nil {
				err = e
			}
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Command: `%s`\n\n", strings.Join(append([]string{"go run ./lab/bench/cmd/servebench"}, args...), " "))
	rep.WriteMarkdown(stdout)
	return nil
}

func isVariant(name string) bool { return name == floor || name == serve || name == serveNoCapture }
