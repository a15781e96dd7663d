package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/spf13/pflag"
)

// tracesShow is `hindsight traces show TASK [--json]`. The task's steps
// are printed as the daemon streams them, never all in memory: a task of
// 100k steps is over 100 MB of JSON.
func tracesShow(ctx context.Context, g *globals, fs *pflag.FlagSet, pos []string, asJSON *bool) error {
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("traces show takes one task id")
	}
	c, err := connect(ctx, g)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	var p taskPrinter = &textTask{w: w}
	if *asJSON {
		p = &jsonTask{w: w}
	}
	if err := c.StreamTask(ctx, pos[0], p.head, p.step); err != nil {
		w.Flush() // what was printed stays printed
		return notFound(err, "task "+pos[0])
	}
	if err := p.end(); err != nil {
		return err
	}
	return w.Flush()
}

// taskPrinter prints a task as it streams in: its head, then each step.
type taskPrinter interface {
	head(*hindsight.Task) error
	step(*hindsight.Step) error
	end() error
}

// jsonTask prints a task as printJSON prints a hindsight.Task, byte for
// byte, one step at a time (steps is the task's last field).
type jsonTask struct {
	w      io.Writer
	header []byte // the task without steps, its closing "\n}\n" cut
	steps  int
	buf    bytes.Buffer
	enc    *json.Encoder
}

func (j *jsonTask) head(task *hindsight.Task) error {
	if err := printJSON(&j.buf, task); err != nil {
		return err
	}
	j.header = bytes.TrimSuffix(bytes.Clone(j.buf.Bytes()), []byte("\n}\n"))
	j.buf.Reset()
	j.enc = json.NewEncoder(&j.buf)
	j.enc.SetEscapeHTML(false)
	j.enc.SetIndent("    ", "  ")
	return nil
}

func (j *jsonTask) step(s *hindsight.Step) error {
	j.buf.Reset()
	if j.steps == 0 {
		j.buf.Write(j.header)
		j.buf.WriteString(",\n  \"steps\": [\n    ")
	} else {
		j.buf.WriteString(",\n    ")
	}
	j.steps++
	if err := j.enc.Encode(s); err != nil {
		return fmt.Errorf("encode step: %w", err)
	}
	_, err := j.w.Write(bytes.TrimSuffix(j.buf.Bytes(), []byte("\n")))
	return err
}

func (j *jsonTask) end() error {
	var err error
	if j.steps == 0 {
		_, err = j.w.Write(append(j.header, "\n}\n"...))
	} else {
		_, err = io.WriteString(j.w, "\n  ]\n}\n")
	}
	return err
}

// textRows is how many step rows textTask aligns at a time: a table
// aligns its columns over the rows it holds.
const textRows = 1000

// textTask prints a task as a header and a table of its steps, columns
// aligned over each textRows rows.
type textTask struct {
	w     io.Writer
	t     *table
	steps int
}

func (p *textTask) head(task *hindsight.Task) error {
	h := newTable(p.w)
	h.row("task", task.ID)
	h.row("started", when(task.StartedAt))
	h.row("ended", when(task.EndedAt))
	h.row("final", yesNo(task.Final))
	h.row("servers", strings.Join(task.Servers, ", "))
	h.row("steps", fmt.Sprintf("%d (%d failed)", task.StepCount, task.FailureCount))
	if task.Reflection != "" {
		h.row("reflection", task.Reflection)
	}
	if err := h.flush(); err != nil {
		return err
	}
	fmt.Fprintln(p.w)
	p.t = newTable(p.w, "#", "TIME", "LATENCY", "SERVER", "METHOD", "TOOL", "TAG", "ERROR")
	return nil
}

func (p *textTask) step(s *hindsight.Step) error {
	errText := s.ErrorCode
	if s.Error != nil {
		errText = strings.TrimSpace(errText + " " + clip(s.Error.Message, 60))
	}
	if errText == "" {
		errText = "-"
	}
	tool := s.Tool
	if tool == "" {
		tool = "-"
	}
	p.t.row(strconv.Itoa(s.StepIndex), s.StartedAt.Local().Format("15:04:05.000"),
		fmt.Sprintf("%.1fms", s.LatencyMS), s.Server, s.Method, tool, string(s.CausalTag), errText)
	if p.steps++; p.steps%textRows == 0 {
		return p.t.flush()
	}
	return nil
}

func (p *textTask) end() error { return p.t.flush() }
