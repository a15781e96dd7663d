package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/daemon"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// ServerName is the name the example server is wrapped under.
const ServerName = "example"

// Options configure a demo.
type Options struct {
	Home hindsight.Home // required: where the daemon keeps its data
	Exe  string         // the hindsight binary; required
	// Out receives the human-readable report as the demo runs; nil for
	// none.
	Out io.Writer
	// Timeout bounds the whole demo; 0 means two minutes.
	Timeout time.Duration
	// FinalWait bounds the wait for a run's task to become final before
	// reflection is asked for anyway; 0 means 30 seconds.
	FinalWait time.Duration
}

// Run is one run of the agent.
type Run struct {
	Name   string `json:"name"`
	TaskID string `json:"task_id"`
	Transcript
	Error      string  `json:"error,omitempty"` // why the agent could not finish
	Seconds    float64 `json:"seconds"`
	TraceSteps int     `json:"trace_steps"` // tools/call steps the daemon recorded for the task
}

// Result is what a demo did.
type Result struct {
	Home       string                 `json:"home"`
	Reflection string                 `json:"reflection"` // "rule-based" or "llm"
	Runs       []*Run                 `json:"runs"`
	Learned    []hindsight.Experience `json:"learned"`
	// Credited are the experiences whose hit count rose because run 2,
	// which was shown them, succeeded.
	Credited []hindsight.Experience `json:"credited"`
}

// credit lists the experiences that reflection on the last run credited
// with a hit.
func credit(ctx context.Context, client *daemon.Client, res *Result, out io.Writer) error {
	all, err := client.Experiences(ctx, hindsight.ListOptions{Server: ServerName})
	if err != nil {
		return fmt.Errorf("list experiences: %w", err)
	}
	for _, e := range all {
		if e.HitCount > 0 {
			res.Credited = append(res.Credited, e)
		}
	}
	fmt.Fprintf(out, "\nRun 2 succeeded with %d lesson(s) it was shown; their hit counts rose.\n", len(res.Credited))
	return nil
}

// Demo runs the learning demo: it makes sure a daemon runs for opt.Home
// (and stops it again if it started it), runs the agent through a
// `hindsight wrap` sidecar in front of `hindsight example-server`, lets
// Hindsight reflect on the run, and runs the agent again.
func Demo(ctx context.Context, opt Options) (*Result, error) {
	if opt.Home == "" || opt.Exe == "" {
		return nil, errors.New("demo: Home and Exe are required")
	}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	res := &Result{Home: string(opt.Home), Reflection: "rule-based"}

	client, stop, err := startDaemon(ctx, opt.Home, opt.Exe)
	if err != nil {
		return nil, err
	}
	defer stop()

	stamp := time.Now().UTC().Format("20060102T150405.000000000")
	runs := []struct{ name, title string }{
		{"run 1", "Hindsight knows nothing yet"},
		{"run 2", "the same task, with what Hindsight learned"},
	}
	for i, r := range runs {
		run := &Run{Name: r.name, TaskID: fmt.Sprintf("demo-%s-%d", stamp, i+1)}
		res.Runs = append(res.Runs, run)
		fmt.Fprintf(out, "\n%s — %s (task %s)\n", strings.ToUpper(r.name[:1])+r.name[1:], r.title, run.TaskID)
		if err := runAgent(ctx, opt, run, out); err != nil {
			return res, err
		}
		if err := awaitFinal(ctx, client, run, opt.FinalWait); err != nil {
			return res, err
		}
		if err := client.Reflect(ctx, []string{run.TaskID}, false, nil); err != nil {
			return res, fmt.Errorf("reflect on %s: %w", run.TaskID, err)
		}
		if i > 0 {
			// Reflecting on the successful run credits the lessons it was
			// shown: their hit counts rise.
			if err := credit(ctx, client, res, out); err != nil {
				return res, err
			}
			break
		}
		fmt.Fprintf(out, "\nThe session ended and task %s is final; Hindsight reflected on it.\n", run.TaskID)
		if st, err := client.Status(ctx); err == nil && st.Reflection != nil && st.Reflection.LLMCallsLastHour > 0 {
			res.Reflection = "llm"
		}
		learned, err := client.Experiences(ctx, hindsight.ListOptions{Server: ServerName})
		if err != nil {
			return res, fmt.Errorf("list experiences: %w", err)
		}
		res.Learned = learned
		fmt.Fprintf(out, "Hindsight learned %d lesson(s) (%s reflection):\n", len(learned), res.Reflection)
		for _, e := range learned {
			fmt.Fprintf(out, "  - %s (confidence %.2f, %s): %s\n", e.Tool, e.Confidence, evidence(&e), e.Lesson)
		}
	}
	printTable(out, res.Runs)
	return res, nil
}

// evidence says what a lesson rests on: the tasks that support it and the
// counter-examples.
func evidence(e *hindsight.Experience) string {
	s := fmt.Sprintf("seen in %d task", e.EvidenceCount)
	if e.EvidenceCount != 1 {
		s += "s"
	}
	if e.CounterCount > 0 {
		s += fmt.Sprintf(", %d counter-example(s)", e.CounterCount)
	}
	return s
}

// startDaemon returns a client for the daemon of home, starting one when
// none runs; stop stops the daemon only if it was started here.
func startDaemon(ctx context.Context, home hindsight.Home, exe string) (*daemon.Client, func(), error) {
	c := daemon.NewClient(home.Socket())
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err := c.Health(hctx)
	cancel()
	if err == nil {
		return c, func() {}, nil
	}
	c, err = daemon.EnsureRunning(ctx, home, exe)
	if err != nil {
		return nil, nil, fmt.Errorf("start daemon: %w", err)
	}
	pid := daemon.LockHolder(home)
	return c, func() { stopDaemon(c, pid) }, nil
}

// runAgent runs the agent once through a wrap sidecar spawned over stdio,
// exactly as an agent host would start it.
func runAgent(ctx context.Context, opt Options, run *Run, out io.Writer) error {
	cmd := exec.CommandContext(ctx, opt.Exe, "wrap", "--name", ServerName, "--", opt.Exe, "example-server")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+string(opt.Home), "HINDSIGHT_TASK_ID="+run.TaskID)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	c, err := client.NewStdioMCPClientWithOptions(opt.Exe, nil, nil, transport.WithCommandFunc(
		func(ctx context.Context, _ string, _ []string, _ []string) (*exec.Cmd, error) { return cmd, nil }))
	if err != nil {
		return fmt.Errorf("start the sidecar: %w", err)
	}
	instructions, err := Initialize(ctx, c)
	if err != nil {
		c.Close()
		return fmt.Errorf("connect to the sidecar: %w (stderr: %s)", err, strings.TrimSpace(stderr.String()))
	}
	n := 0
	agent := &Agent{
		Client:       c,
		Instructions: instructions,
		Month:        "2026-03",
		Due:          time.Date(2026, 4, 15, 0, 0, 0, 0, time.UTC),
		User:         "demo",
		Password:     "demo-password-123",
		OnStep: func(s Step) {
			n++
			printStep(out, n, s)
		},
	}
	agent.OnInstructions = func(text string) {
		fmt.Fprintf(out, "  the server's instructions carry what Hindsight added:\n")
		for _, line := range strings.Split(text, "\n") {
			fmt.Fprintf(out, "      │ %s\n", line)
		}
	}
	t, runErr := agent.Run(ctx)
	closeErr := c.Close()
	run.Transcript = *t
	run.Seconds = time.Since(start).Seconds()
	if runErr != nil {
		run.Error = runErr.Error()
		fmt.Fprintf(out, "  the agent gave up: %v\n", runErr)
	}
	if closeErr != nil && !errors.Is(closeErr, io.EOF) {
		return fmt.Errorf("close the sidecar: %w (stderr: %s)", closeErr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// awaitFinal waits until the daemon has the run's task as final, and notes
// how many tool calls it recorded; after wait it goes on regardless
// (reflection can still be asked for).
func awaitFinal(ctx context.Context, c *daemon.Client, run *Run, wait time.Duration) error {
	if wait <= 0 {
		wait = 30 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		t, err := c.Task(ctx, run.TaskID)
		if err == nil {
			run.TraceSteps = 0
			for _, s := range t.Steps {
				if s.Method == "tools/call" {
					run.TraceSteps++
				}
			}
			if t.Final {
				return nil
			}
		} else if !errors.Is(err, hindsight.ErrNotFound) && !strings.Contains(err.Error(), "not found") {
			return fmt.Errorf("read task %s: %w", run.TaskID, err)
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// printStep prints one line of a run's transcript.
func printStep(w io.Writer, n int, s Step) {
	status := "ok"
	if s.IsError {
		status = "error"
		if code, _, _ := strings.Cut(s.Result, " "); len(code) == 3 && strings.Trim(code, "0123456789") == "" {
			status = code
		}
	}
	fmt.Fprintf(w, "  %2d  %-16s %-5s %s\n", n, s.Tool, status, ellipsize(s.Result, 90))
	if s.Why != "" && !strings.HasPrefix(s.Why, "ask Hindsight") && (strings.Contains(s.Why, "advice") || strings.Contains(s.Why, "first")) {
		fmt.Fprintf(w, "      %-16s       ↳ %s\n", "", s.Why)
	}
	if s.Hindsight != "" && !strings.HasPrefix(s.Tool, "query_hindsight") {
		fmt.Fprintf(w, "      %-16s       + %s\n", "", ellipsize(strings.ReplaceAll(s.Hindsight, "\n", " "), 90))
	}
	for _, l := range s.Learned {
		fmt.Fprintf(w, "      %-16s       ↳ learned: %s\n", "", ellipsize(l, 90))
	}
}

func ellipsize(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// printTable prints the before/after comparison of the runs.
func printTable(w io.Writer, runs []*Run) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-18s", "")
	for _, r := range runs {
		fmt.Fprintf(w, "%10s", r.Name)
	}
	row := func(label string, f func(r *Run) string) {
		fmt.Fprintf(w, "\n%-18s", label)
		for _, r := range runs {
			fmt.Fprintf(w, "%10s", f(r))
		}
	}
	row("steps", func(r *Run) string { return fmt.Sprint(len(r.Steps)) })
	row("failures", func(r *Run) string { return fmt.Sprint(r.Failures) })
	row("tokens injected", func(r *Run) string { return fmt.Sprint(r.TokensInjected) })
	row("task done", func(r *Run) string {
		if r.Done {
			return "yes"
		}
		return "no"
	})
	row("seconds", func(r *Run) string { return fmt.Sprintf("%.2f", r.Seconds) })
	fmt.Fprintln(w)
}
