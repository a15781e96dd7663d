package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`), build
// events included.
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Elapsed    float64
	Output     string
}

// readEvents calls onEvent for each JSON event of r, in order, and onOther
// for each line that is not one, copying every line to raw.
func readEvents(r io.Reader, raw io.Writer, onEvent func(event), onOther func([]byte)) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := raw.Write(line); werr != nil {
				return fmt.Errorf("save events: %w", werr)
			}
			var ev event
			if bytes.HasPrefix(line, []byte("{")) && json.Unmarshal(line, &ev) == nil && ev.Action != "" {
				onEvent(ev)
			} else {
				onOther(line)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read events: %w", err)
		}
	}
}

// topLevel returns the top-level test of a test or subtest name.
func topLevel(test string) string {
	top, _, _ := strings.Cut(test, "/")
	return top
}

// echoer prints what plain `go test` prints: package-level output (but
// its PASS lines), build output, and a failed test's whole output (its
// subtests' included), held back until the test ends.
type echoer struct {
	w      io.Writer
	held   map[[2]string][]string // package, top-level test → output lines
	order  [][2]string            // held keys, first seen first
	failed bool
}

func newEchoer(w io.Writer) *echoer {
	return &echoer{w: w, held: map[[2]string][]string{}}
}

func (e *echoer) add(ev event) {
	switch {
	case ev.Action == "build-output":
		io.WriteString(e.w, ev.Output)
	case ev.Action == "build-fail":
		e.failed = true
	case ev.Test == "" && ev.Action == "output":
		if ev.Output == "PASS\n" {
			return
		}
		if !strings.HasPrefix(ev.Output, "ok ") && !strings.HasPrefix(ev.Output, "?") {
			e.flush(ev.Package) // a panic or timeout: show the tests it cut short
		}
		io.WriteString(e.w, ev.Output)
	case ev.Test == "":
		if ev.Action == "fail" {
			e.failed = true
			e.flush(ev.Package)
		}
	case ev.Action == "output":
		k := [2]string{ev.Package, topLevel(ev.Test)}
		if _, ok := e.held[k]; !ok {
			e.order = append(e.order, k)
		}
		e.held[k] = append(e.held[k], ev.Output)
	case ev.Action == "fail" && ev.Test == topLevel(ev.Test):
		e.failed = true
		e.print([2]string{ev.Package, ev.Test})
	case (ev.Action == "pass" || ev.Action == "skip") && ev.Test == topLevel(ev.Test):
		e.drop([2]string{ev.Package, ev.Test})
	}
}

// finish prints the output of the tests that never ended.
func (e *echoer) finish() { e.flush("") }

// flush prints the held output of pkg's tests ("": every package's).
func (e *echoer) flush(pkg string) {
	for _, k := range slices.Clone(e.order) {
		if pkg == "" || k[0] == pkg {
			e.print(k)
		}
	}
}

func (e *echoer) print(k [2]string) {
	for _, line := range e.held[k] {
		io.WriteString(e.w, line)
	}
	e.drop(k)
}

func (e *echoer) drop(k [2]string) {
	if _, ok := e.held[k]; !ok {
		return
	}
	delete(e.held, k)
	e.order = slices.DeleteFunc(e.order, func(o [2]string) bool { return o == k })
}

// timing is a test's or a package's duration.
type timing struct {
	name    string
	pkg     string
	seconds float64
}

// summary totals the final events of tests and packages.
type summary struct {
	tests, pkgs                         []timing
	passedTests, failedTests, skipTests int
	passedPkgs, failedPkgs, skipPkgs    int
	failedNames                         []string
}

func (s *summary) add(ev event) {
	if ev.Action != "pass" && ev.Action != "fail" && ev.Action != "skip" {
		return
	}
	if ev.Test == "" {
		s.pkgs = append(s.pkgs, timing{pkg: ev.Package, seconds: ev.Elapsed})
		count(ev.Action, &s.passedPkgs, &s.failedPkgs, &s.skipPkgs)
		return
	}
	if ev.Test != topLevel(ev.Test) {
		if ev.Action == "fail" {
			s.failedNames = append(s.failedNames, ev.Package+" "+ev.Test)
		}
		return
	}
	s.tests = append(s.tests, timing{name: ev.Test, pkg: ev.Package, seconds: ev.Elapsed})
	count(ev.Action, &s.passedTests, &s.failedTests, &s.skipTests)
	if ev.Action == "fail" {
		s.failedNames = append(s.failedNames, ev.Package+" "+ev.Test)
	}
}

func count(action string, pass, fail, skip *int) {
	switch action {
	case "pass":
		*pass++
	case "fail":
		*fail++
	default:
		*skip++
	}
}

// write prints the n slowest tests and packages, the failures and the
// counts.
func (s *summary) write(w io.Writer, n int) {
	slowest := func(ts []timing) []timing {
		ts = slices.Clone(ts)
		slices.SortStableFunc(ts, func(a, b timing) int { return cmp.Compare(b.seconds, a.seconds) })
		return ts[:min(n, len(ts))]
	}
	fmt.Fprintf(w, "slowest tests:\n")
	for _, t := range slowest(s.tests) {
		fmt.Fprintf(w, "%9.2fs  %s %s\n", t.seconds, t.pkg, t.name)
	}
	fmt.Fprintf(w, "slowest packages:\n")
	for _, t := range slowest(s.pkgs) {
		fmt.Fprintf(w, "%9.2fs  %s\n", t.seconds, t.pkg)
	}
	slices.Sort(s.failedNames)
	for _, name := range slices.Compact(s.failedNames) {
		fmt.Fprintf(w, "failed: %s\n", name)
	}
	fmt.Fprintf(w, "packages: %d passed, %d failed, %d without tests\n", s.passedPkgs, s.failedPkgs, s.skipPkgs)
	// The last line, in the plain form CI reads: top-level tests.
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped\n", s.passedTests, s.failedTests, s.skipTests)
}
