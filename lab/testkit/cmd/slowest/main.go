// Command slowest reads `go test -json` output, as `make test` runs it.
//
// With -save FILE it is a filter: it prints what `go test` without -json
// would print (each package's closing ok / FAIL line, the whole output of
// every failed test, build errors), appends the JSON events to FILE, and
// exits with status 1 when a test or a package failed.
//
// Without -save it summarizes the saved files named as arguments: the
// slowest top-level tests and packages, then the counts of passed, failed
// and skipped tests and packages. It exits with status 1 when one failed.
//
//	go test -json ./... | slowest -save test.json
//	slowest -n 20 test.json
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	save := flag.String("save", "", "filter mode: echo go test's plain output and append the JSON events to this file")
	n := flag.Int("n", 15, "how many of the slowest tests and packages to list")
	flag.Parse()
	if *save != "" {
		os.Exit(filter(*save))
	}
	os.Exit(summarize(flag.Args(), *n))
}

func filter(path string) int {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	e := newEchoer(out)
	err = readEvents(os.Stdin, f, func(ev event) { e.add(ev); out.Flush() }, func(line []byte) {
		out.Write(line) // not an event: go test's own message, shown as is
		out.Flush()
	})
	e.finish()
	out.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		return 2
	}
	if e.failed {
		return 1
	}
	return 0
}

func summarize(paths []string, n int) int {
	var s summary
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "slowest:", err)
			return 2
		}
		err = readEvents(f, io.Discard, s.add, func([]byte) {})
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "slowest:", err)
			return 2
		}
	}
	s.write(os.Stdout, n)
	if s.failedTests+s.failedPkgs > 0 {
		return 1
	}
	return 0
}
