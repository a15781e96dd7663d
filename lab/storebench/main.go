//go:build linux

// Command storebench prints the embedded experience store's scale table:
// for each size, the resident set after Open, start-up time (Open until
// the first query is answered), query latency (p50/p99 wall clock and
// process CPU time, without and with the filters the sidecar sends), the
// resident set after the queries (with its file-backed part: the mapped
// snapshot and Badger's tables) and the bytes on disk. Each store is written by one child process and
// measured by another, so the resident set is the store's alone.
//
// Usage (from the module's root):
//
//	go run ./lab/storebench [-sizes 1000,10000,100000] [-queries 500] [-dir DIR]
//
// With -dir, stores are kept in DIR/N and reused by later runs.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "storebench:", err)
		}
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("storebench", flag.ContinueOnError)
	sizes := fs.String("sizes", "1000,10000,100000", "comma-separated experience counts")
	queries := fs.Int("queries", 500, "queries per size and mode (at most 500)")
	warmup := fs.Int("warmup", 1, "unmeasured passes over the queries before measuring")
	dir := fs.String("dir", "", "keep the stores in `DIR`/N (default: a temporary directory, removed after)")
	child := fs.String("child", "", "internal: build or measure")
	n := fs.Int("n", 0, "internal: experience count")
	cpuProf := fs.String("cpuprofile", "", "measure child: write a CPU profile of Open and the queries to `FILE`")
	memProf := fs.String("memprofile", "", "measure child: write a heap profile after Open to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *child {
	case "build":
		return build(*dir, *n)
	case "measure":
		return measure(*dir, *n, *queries, *warmup, *cpuProf, *memProf, out)
	case "":
	default:
		return fmt.Errorf("unknown child mode %q", *child)
	}
	root := *dir
	if root == "" {
		tmp, err := os.MkdirTemp("", "storebench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		root = tmp
	}
	var rows []result
	for _, f := range strings.Split(*sizes, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || size <= 0 {
			return fmt.Errorf("bad size %q", f)
		}
		d := filepath.Join(root, strconv.Itoa(size))
		if _, err := os.Stat(filepath.Join(d, builtMarker)); err != nil {
			if err := self(nil, "-child=build", "-dir="+d, "-n="+strconv.Itoa(size)); err != nil {
				return fmt.Errorf("build %d: %w", size, err)
			}
		}
		var r result
		extra := []string{"-child=measure", "-dir=" + d, "-n=" + strconv.Itoa(size),
			"-queries=" + strconv.Itoa(*queries), "-warmup=" + strconv.Itoa(*warmup)}
		if *cpuProf != "" {
			extra = append(extra, "-cpuprofile="+*cpuProf+"."+strconv.Itoa(size))
		}
		if *memProf != "" {
			extra = append(extra, "-memprofile="+*memProf+"."+strconv.Itoa(size))
		}
		if err := self(&r, extra...); err != nil {
			return fmt.Errorf("measure %d: %w", size, err)
		}
		r.DiskBytes = diskBytes(d)
		rows = append(rows, r)
	}
	printTable(out, rows)
	return nil
}

// self runs this program with args; when into is not nil it decodes the
// child's standard output (one JSON result) into it.
func self(into *result, args ...string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	if into == nil {
		cmd.Stdout = os.Stderr
		return cmd.Run()
	}
	b, err := cmd.Output()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// diskBytes sums the sizes of the files under dir.
func diskBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func printTable(out io.Writer, rows []result) {
	fmt.Fprintln(out, "| experiences | RSS after open (file) | start-up | query p50 / p99 (CPU) | filtered p50 / p99 (CPU) | RSS after queries (file) | on disk |")
	fmt.Fprintln(out, "|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(out, "| %d | %.0f MB (%.0f) | %.0f ms | %.2f / %.2f ms (%.2f / %.2f) | %.2f / %.2f ms (%.2f / %.2f) | %.0f MB (%.0f) | %.0f MB |\n",
			r.N, r.RSSOpenMB, r.FileOpenMB, r.StartMS,
			r.P50MS, r.P99MS, r.CPU50MS, r.CPU99MS, r.FP50MS, r.FP99MS, r.FCPU50MS, r.FCPU99MS,
			r.RSSQueriesMB, r.FileQueriesMB, float64(r.DiskBytes)/(1<<20))
	}
}
