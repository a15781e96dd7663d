package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// newBar returns a progress bar on stderr for total items (-1: unknown,
// a spinner with a count), or nil when quiet or stderr is not a terminal:
// scripts and logs get no bar. The methods of a nil bar do nothing.
func newBar(quiet bool, desc string, total int) *bar {
	if quiet || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	return &bar{progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(desc), progressbar.OptionShowCount(),
		progressbar.OptionSpinnerType(14), progressbar.OptionThrottle(65_000_000))}
}

// bar is a progress bar that a nil pointer leaves undrawn.
type bar struct{ pb *progressbar.ProgressBar }

// set shows done of total (total < 0 keeps the current maximum).
func (b *bar) set(done, total int) {
	if b == nil {
		return
	}
	if total >= 0 {
		b.pb.ChangeMax(total)
	}
	_ = b.pb.Set(done)
}

// add counts n more items.
func (b *bar) add(n int) {
	if b != nil {
		_ = b.pb.Add(n)
	}
}

// finish completes the bar and ends its line.
func (b *bar) finish() {
	if b != nil {
		_ = b.pb.Finish()
		fmt.Fprintln(os.Stderr)
	}
}

// lineCounter passes bytes through and counts the lines on bar.
type lineCounter struct {
	r   io.Reader
	w   io.Writer
	bar *bar
}

func (l lineCounter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.bar.add(countLines(p[:n]))
	return n, err
}

func (l lineCounter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	l.bar.add(countLines(p[:n]))
	return n, err
}

func countLines(p []byte) int {
	n := 0
	for _, c := range p {
		if c == '\n' {
			n++
		}
	}
	return n
}

// info prints an informational line on stderr unless quiet.
func (g *globals) info(format string, a ...any) {
	if !g.quiet {
		fmt.Fprintf(os.Stderr, format+"\n", a...)
	}
}

// countFileLines counts the lines of the file at path (-1 when it cannot
// be read), for a bar's total.
func countFileLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	n, buf := 0, make([]byte, 64<<10)
	for {
		k, err := f.Read(buf)
		n += countLines(buf[:k])
		if err != nil {
			return n
		}
	}
}
