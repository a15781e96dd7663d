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

	"github.com/mark3labs/mcp-go/client"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/internal/httpserve"
	"github.com/hindsight-proxy/hindsight/replay"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

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

func replayServeCmd(g *globals) *cobra.Command {
	c := leaf("serve (--task ID | --file FILE) [--server NAME] [--match exact|tool|sequential] [--listen ADDR]",
		"an MCP server answering as the recorded server did", "  hindsight replay serve --task TASK\n  hindsight replay serve --file steps.jsonl --server fs --listen 127.0.0.1:8940")
	fs := c.Flags()
	rf := addRecordingFlags(fs)
	match := fs.String("match", "exact", "how calls are matched to recorded ones: exact, tool or sequential")
	listen := fs.String("listen", "", "serve Streamable HTTP on ADDR (at /mcp) instead of stdio")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
		return replayServe(ctx, g, fs, pos, rf, match, listen)
	})
}

// replayServe is `hindsight replay serve`: an MCP server answering from a
// recorded task, on stdio or, with --listen, over Streamable HTTP.
func replayServe(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, rf recordingFlags, match, listen *string) error {
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
	g.info("replaying %s (%d calls) at http://%s/mcp", rec.Server, len(rec.Calls), ln.Addr())
	if err := httpserve.Serve(ctx, hs, ln); err != nil {
		return fmt.Errorf("serve replay: %w", err)
	}
	return nil
}

// errDifferent makes `replay verify` exit 1 when a call differed.
var errDifferent = errors.New("the live server answered differently")

func replayVerifyCmd(g *globals) *cobra.Command {
	c := leaf("verify (--task ID | --file FILE) [--server NAME] [--allow-writes] [--ignore PATH]… [--json] (-- CMD [ARGS…] | --upstream URL)",
		"the recorded calls sent to a live server, the differences reported per step; exit 1 when any differ",
		"  hindsight replay verify --task TASK -- npx -y @modelcontextprotocol/server-filesystem .\n  hindsight replay verify --file steps.jsonl --upstream http://127.0.0.1:8080/mcp --json")
	fs := c.Flags()
	rf := addRecordingFlags(fs)
	upstream := fs.String("upstream", "", "the live server's Streamable HTTP URL")
	allowWrites := fs.Bool("allow-writes", false, "also send calls of tools not annotated readOnlyHint (or annotated destructiveHint)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	keep := fs.Bool("keep-volatile", false, "compare timestamps and UUIDs too")
	ignorePaths := fs.StringArray("ignore", nil, "a gjson path in a tools/call result to leave out of the comparison (repeatable), e.g. structuredContent.id")
	return runs(c, func(ctx context.Context, fs *pflag.FlagSet, cmdline []string) error {
		return replayVerify(ctx, g, fs, cmdline, rf, upstream, allowWrites, asJSON, keep, *ignorePaths)
	})
}

// replayVerify is `hindsight replay verify`: the recorded calls sent to a
// live server, the differences reported.
func replayVerify(ctx context.Context, g *globals, fs *pflag.FlagSet, cmdline []string, rf recordingFlags, upstream *string, allowWrites, asJSON, keep *bool, ignore []string) error {
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
	var c *client.Client
	if *upstream != "" {
		c, err = replay.DialHTTP(vctx, *upstream)
	} else {
		c, err = replay.DialStdio(cmdline[0], cmdline[1:], os.Environ(), os.Stderr)
	}
	if err != nil {
		return fmt.Errorf("verify replay: %w", err)
	}
	rep, err := replay.Verify(vctx, rec, c, replay.VerifyOptions{AllowWrites: *allowWrites, Ignore: ignore, KeepVolatile: *keep})
	c.Close()
	if err != nil {
		return fmt.Errorf("verify replay: %w", err)
	}
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
