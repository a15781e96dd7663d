//go:build linux

// Command relaybench measures what `hindsight wrap` costs an agent: a stdio
// tools/call echo round trip direct to an echo MCP server, through a plain
// byte relay (the floor), and through the sidecar with capture on and off,
// all in one run with the variants interleaved. It prints a Markdown table
// and the design's targets.
//
// Usage:
//
//	relaybench [flags]             run the comparison (from the module's root)
//	relaybench echo                be the echo MCP server on stdin/stdout
//	relaybench relay -- CMD [ARGS] be a plain byte relay in front of CMD
//
// With no -hindsight flag it builds ./cmd/hindsight into a temporary
// directory first, so run it from the module's root:
//
//	go run ./lab/bench/cmd/relaybench
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight/internal/profile"
	"github.com/hindsight-proxy/hindsight/lab/bench"
)

func main() { bench.Main("relaybench", dispatch) }

// dispatch runs one of the program's modes.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "echo":
			return bench.ServeEcho(os.Stdin, os.Stdout)
		case "relay":
			rest := args[1:]
			if len(rest) > 0 && rest[0] == "--" {
				rest = rest[1:]
			}
			if path := os.Getenv("RELAYBENCH_CPUPROFILE"); path != "" {
				stop, err := profile.StartCPU(path)
				if err != nil {
					return err
				}
				defer stop()
			}
			return bench.Relay(ctx, rest, os.Stdin, os.Stdout, os.Stderr)
		case "fleet":
			return fleet(ctx, args[1:], stdout, stderr)
		}
	}
	return run(ctx, args, stdout, stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("relaybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		rounds   = fs.Int("rounds", 5, "rounds of interleaved measurements (medians are taken over them)")
		duration = fs.Duration("duration", 800*time.Millisecond, "length of one measurement (0: -calls only)")
		calls    = fs.Int("calls", 0, "cap on calls per measurement (0: none)")
		concList = fs.String("concurrency", "1,64", "calls in flight, comma-separated")
		payload  = fs.Int("payload", 256, "bytes of text in each echo call")
		pace     = fs.Float64("pace", 1000, "also measure one call in flight started this many times a second (0: not)")
		warmup   = fs.Int("warmup", 500, "calls per variant before the first round")
		settle   = fs.Duration("settle", bench.DefaultSettle, "before each measurement, wait up to this long for the machine to be quiet (negative: no wait)")
		variants = fs.String("variants", strings.Join([]string{bench.Direct, bench.ByteRelay, bench.Sidecar, bench.SidecarNoCapture}, ","),
			"variants to measure, in order")
		hindsightBin = fs.String("hindsight", "", "hindsight binary (default: build ./cmd/hindsight)")
		compare      variantFlags
		verbose      = fs.Bool("v", false, "print every measurement to stderr")
		profDir      = fs.String("sidecar-cpuprofile", "", "write each sidecar's and the byte relay's CPU profile to DIR/VARIANT.pprof (HINDSIGHT_CPUPROFILE, RELAYBENCH_CPUPROFILE)")
		daemonProf   = fs.String("daemon-cpuprofile", "", "write the CPU profile of each sidecar's daemon, from its start to its stop at the end of the run, to DIR/VARIANT-daemon.pprof (HINDSIGHT_DAEMON_CPUPROFILE)")
	)
	fs.Var(&compare, "compare", "NAME=BINARY: also measure `hindsight wrap` of another build, as variant NAME (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	concs, err := bench.ParseCounts(*concList)
	if err != nil {
		return fmt.Errorf("parse -concurrency: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	tmp, err := os.MkdirTemp("", "relaybench-")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)

	names := strings.Split(*variants, ",")
	bin := *hindsightBin
	if bin == "" && wantsSidecar(names) {
		fmt.Fprintln(stderr, "building ./cmd/hindsight …")
		if bin, err = bench.BuildHindsight(ctx, tmp); err != nil {
			return err
		}
	}
	vs, err := makeVariants(names, self, bin, tmp)
	if err != nil {
		return err
	}
	for _, c := range compare {
		vs = append(vs, bench.Variant{
			Name: c.name,
			Argv: []string{c.bin, "wrap", "--name", "echo", "--", self, "echo"},
			Home: filepath.Join(tmp, "home-"+c.name),
		})
	}
	if *profDir != "" {
		abs, err := profileDir(*profDir)
		if err != nil {
			return fmt.Errorf("prepare -sidecar-cpuprofile: %w", err)
		}
		for i, v := range vs {
			switch {
			case v.Home != "": // a sidecar
				vs[i].Env = append(vs[i].Env, "HINDSIGHT_CPUPROFILE="+filepath.Join(abs, v.Name+".pprof"))
			case v.Name == bench.ByteRelay:
				vs[i].Env = append(vs[i].Env, "RELAYBENCH_CPUPROFILE="+filepath.Join(abs, v.Name+".pprof"))
			}
		}
	}
	if *daemonProf != "" {
		abs, err := profileDir(*daemonProf)
		if err != nil {
			return fmt.Errorf("prepare -daemon-cpuprofile: %w", err)
		}
		for i, v := range vs {
			if v.Home != "" { // the sidecar starts its daemon with its own environment
				vs[i].Env = append(vs[i].Env, "HINDSIGHT_DAEMON_CPUPROFILE="+filepath.Join(abs, v.Name+"-daemon.pprof"))
			}
		}
	}
	opts := bench.Options{Variants: vs, Rounds: *rounds, Concurrency: concs, Duration: *duration,
		Calls: *calls, Warmup: *warmup, Payload: *payload, Pace: *pace, Settle: *settle}
	if *verbose {
		opts.Progress = stderr
	}
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Command: `%s`\n\n", strings.Join(append([]string{"go run ./lab/bench/cmd/relaybench"}, args...), " "))
	rep.WriteMarkdown(stdout)
	return nil
}

// profileDir makes dir, and returns it as an absolute path.
func profileDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve profile directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("create profile directory: %w", err)
	}
	return abs, nil
}

// makeVariants builds the named variants around this program's echo mode.
// Each sidecar gets a fresh HINDSIGHT_HOME under tmp.
func makeVariants(names []string, self, hindsightBin, tmp string) ([]bench.Variant, error) {
	echo := []string{self, "echo"}
	sidecarArgv := []string{hindsightBin, "wrap", "--name", "echo", "--"}
	var out []bench.Variant
	for _, n := range names {
		v := bench.Variant{Name: n}
		switch n {
		case bench.Direct:
			v.Argv = echo
		case bench.ByteRelay:
			v.Argv = append([]string{self, "relay", "--"}, echo...)
		case bench.Sidecar, bench.SidecarNoCapture:
			v.Argv = append(sidecarArgv, echo...)
			v.Home = filepath.Join(tmp, "home-"+n)
			v.CaptureOff = n == bench.SidecarNoCapture
		default:
			return nil, fmt.Errorf("unknown variant %q (want %s, %s, %s or %s)", n,
				bench.Direct, bench.ByteRelay, bench.Sidecar, bench.SidecarNoCapture)
		}
		v.Argv = append([]string(nil), v.Argv...)
		out = append(out, v)
	}
	return out, nil
}

func wantsSidecar(names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, bench.Sidecar) {
			return true
		}
	}
	return false
}

// variantFlags collects -compare NAME=BINARY flags.
type variantFlags []struct{ name, bin string }

func (v *variantFlags) String() string { return "" }

func (v *variantFlags) Set(s string) error {
	name, bin, ok := strings.Cut(s, "=")
	if !ok || name == "" || bin == "" {
		return fmt.Errorf("want NAME=BINARY, got %q", s)
	}
	switch name {
	case bench.Direct, bench.ByteRelay, bench.Sidecar, bench.SidecarNoCapture:
		return fmt.Errorf("%q is a built-in variant's name", name)
	}
	*v = append(*v, struct{ name, bin string }{name, bin})
	return nil
}

// fleet reports the memory of 1, 10, 100… capturing sidecars sharing one
// daemon (relaybench fleet -servers 1,10,100).
func fleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("relaybench fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.String("servers", "1,10,100", "numbers of sidecars, comma-separated")
	calls := fs.Int("calls", 200, "echo calls through each sidecar before its memory is read")
	bin := fs.String("hindsight", "", "hindsight binary (default: build ./cmd/hindsight)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ns, err := bench.ParseCounts(*servers)
	if err != nil {
		return fmt.Errorf("parse -servers: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	tmp, err := os.MkdirTemp("", "relaybench-fleet-")
	if err != nil {
		return fmt.Errorf("create temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		if *bin, err = bench.BuildHindsight(ctx, tmp); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "| sidecars | RSS, median | private, median | RSS, max | peak RSS, median | peak RSS, max | RSS, all sidecars | PSS, all sidecars |\n|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for i, n := range ns {
		home := filepath.Join(tmp, fmt.Sprintf("home-%d", i))
		r, err := bench.Fleet(ctx, []string{*bin, "wrap", "--name", "echo", "--", self, "echo"}, []string{"HINDSIGHT_HOME=" + home}, n, *calls)
		if e := bench.StopDaemons(home, 15*time.Second); e != nil && err == nil {
			err = e
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "| %d | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.0f MB | %.0f MB |\n", n, float64(r.RSSMedian)/1e6,
			float64(r.AnonMedian)/1e6, float64(r.RSSMax)/1e6, float64(r.HWMMedian)/1e6, float64(r.HWMMax)/1e6, float64(r.RSSSum)/1e6, float64(r.PSSSum)/1e6)
	}
	return nil
}
