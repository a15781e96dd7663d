package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/replay"
)

// runReplay is `hindsight replay serve | verify`.
func runReplay(ctx context.Context, g *globals, args []string) error {
	if len(args) == 0 {
		return usageErr("replay serve | verify")
	}
	switch args[0] {
	case "serve":
		return replayServe(ctx, g, args[1:])
	case "verify":
		return replayVerify(ctx, g, args[1:])
	}
	return usageErr("replay: unknown subcommand %q (want serve or verify)", args[0])
}

// recordingFlags are the flags naming what to replay.
type recordingFlags struct {
	task, file, server *string
}

func addRecordingFlags(fs interface {
	String(name, value, usage string) *string
}) recordingFlags {
	return recordingFlags{
		task:   fs.String("task", "", "replay this stored task (asks the daemon)"),
		file:   fs.String("file", "", "replay steps from FILE: a `traces export` (JSON Lines) or `traces show --json`"),
		server: fs.String("server", "", "the server to replay, when the steps are of several"),
	}
}

// load reads the steps named by the flags and builds the recording.
func (f recordingFlags) load(ctx context.Context, g *globals) (*replay.Recording, error) {
	if (*f.task == "") == (*f.file == "") {
		return nil, usageErr("name what to replay: --task ID or --file FILE")
	}
	var steps []hindsight.Step
	if *f.file != "" {
		fh, err := os.Open(*f.file)
		if err != nil {
			return nil, fmt.Errorf("load recording: %w", err)
		}
		defer fh.Close()
		if steps, err = replay.ReadSteps(fh); err != nil {
			return nil, fmt.Errorf("load recording: %w", err)
		}
	} else {
		c, err := connect(ctx, g)
		if err != nil {
			return nil, err
		}
		task, err := c.Task(ctx, *f.task)
		if err != nil {
			return nil, notFound(err, "task "+*f.task)
		}
		steps = task.Steps
	}
	rec, err := replay.New(steps, *f.server)
	if err != nil {
		return nil, fmt.Errorf("load recording: %w", err)
	}
	return rec, nil
}

// replayServe is `hindsight replay serve`: an MCP server answering from a
// recorded task, on stdio or, with --listen, over Streamable HTTP.
func replayServe(ctx context.Context, g *globals, args []string) error {
	fs := newFlags("replay serve", "replay serve (--task ID | --file FILE) [--server NAME] [--match exact|tool|sequential] [--listen ADDR]")
	rf := addRecordingFlags(fs)
	match := fs.String("match", "exact", "how calls are matched to recorded ones: exact, tool or sequential")
	listen := fs.String("listen", "", "serve Streamable HTTP on ADDR (at /mcp) instead of stdio")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fs.Usage()
		return usageErr("replay serve takes no arguments")
	}
	mode, err := replay.ParseMatch(*match)
	if err != nil {
		return usageErr("%v", err)
	}
	rec, err := rf.load(ctx, g)
	if err != nil {
		return err
	}
	srv := replay.NewServer(rec, mode)
	if *listen == "" {
		if err := srv.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("serve replay: %w", err)
		}
		return nil
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("serve replay: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "replaying %s (%d calls) at http://%s/mcp\n", rec.Server, len(rec.Calls), ln.Addr())
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve replay: %w", err)
	}
	return nil
}

// errDifferent makes `replay verify` exit 1 when a call differed.
var errDifferent = errors.New("the live server answered differently")

// replayVerify is `hindsight replay verify`: the recorded calls sent to a
// live server, the differences reported.
func replayVerify(ctx context.Context, g *globals, args []string) error {
	fs := newFlags("replay verify", "replay verify (--task ID | --file FILE) [--server NAME] [--allow-writes] [--ignore PATH]… [--json] (-- CMD [ARGS…] | --upstream URL)")
	rf := addRecordingFlags(fs)
	upstream := fs.String("upstream", "", "the live server's Streamable HTTP URL")
	allowWrites := fs.Bool("allow-writes", false, "also send calls of tools not annotated readOnlyHint (or annotated destructiveHint)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	keep := fs.Bool("keep-volatile", false, "compare timestamps and UUIDs too")
	var ignore multiFlag
	fs.Var(&ignore, "ignore", "a gjson path in a tools/call result to leave out of the comparison (repeatable), e.g. structuredContent.id")
	cmdline, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if (len(cmdline) == 0) == (*upstream == "") {
		fs.Usage()
		return usageErr("replay verify needs the live server: -- CMD [ARGS…] or --upstream URL")
	}
	rec, err := rf.load(ctx, g)
	if err != nil {
		return err
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var c interface{ Close() error }
	var rep *replay.Report
	if *upstream != "" {
		cl, err := replay.DialHTTP(vctx, *upstream)
		if err != nil {
			return fmt.Errorf("verify replay: %w", err)
		}
		c = cl
		rep, err = replay.Verify(vctx, rec, cl, replay.VerifyOptions{AllowWrites: *allowWrites, Ignore: ignore, KeepVolatile: *keep})
		if err != nil {
			c.Close()
			return fmt.Errorf("verify replay: %w", err)
		}
	} else {
		cl, err := replay.DialStdio(cmdline[0], cmdline[1:], os.Environ(), os.Stderr)
		if err != nil {
			return fmt.Errorf("verify replay: %w", err)
		}
		c = cl
		rep, err = replay.Verify(vctx, rec, cl, replay.VerifyOptions{AllowWrites: *allowWrites, Ignore: ignore, KeepVolatile: *keep})
		if err != nil {
			c.Close()
			return fmt.Errorf("verify replay: %w", err)
		}
	}
	c.Close()
	if *asJSON {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		t := newTable(stdout, "STEP", "TOOL", "STATUS", "DETAIL")
		for _, s := range rep.Steps {
			detail := s.Reason
			for _, d := range s.Diffs {
				if detail != "" {
					detail += "; "
				}
				detail += fmt.Sprintf("%s: recorded %s, live %s", d.Field, clip(oneLine(d.Recorded), 80), clip(oneLine(d.Live), 80))
			}
			if detail == "" {
				detail = "-"
			}
			t.row(fmt.Sprint(s.Step), s.Tool, s.Status, detail)
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(stdout, rep.Summary())
	}
	if !rep.OK() {
		return errDifferent
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
