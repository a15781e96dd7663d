package hindsight_test

import (
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/hindsight-proxy/hindsight"

// layers is the architecture: each package's layer, lowest first. A
// package's code (tests aside) imports only packages of its own layer or
// below; docs/architecture.md draws the same order.
var layers = []struct {
	name     string
	packages []string
}{
	{"domain types and leaf helpers", []string{"", "bpe", "errtemplate", "guard", "store", "store/rank", "store/tokenize",
		"internal/badgerdb", "internal/diskspace", "internal/erase", "internal/filelock", "internal/imagetrim", "internal/losses",
		"internal/profile", "internal/httpserve", "internal/defaults", "internal/safelog", "demo/exampleserver", "install"}},
	{"wire format", []string{"wire"}},
	{"relay", []string{"proxy"}},
	{"spool", []string{"spool"}},
	{"capture", []string{"capture", "telemetry", "telemetry/otlp", "toolpin"}},
	{"trace store", []string{"traces"}},
	{"learning and giving back", []string{"reflect", "reflect/llm", "inject", "store/embedded", "store/weaviate",
		"store/embedder", "store/embedder/openaiembed"}},
	{"memory service", []string{"memory"}},
	{"daemon", []string{"daemon"}},
	{"sidecar", []string{"sidecar"}},
	{"daemon's users", []string{"memserver", "replay", "ui", "eval", "eval/convert", "demo"}},
	{"command line", []string{"cli"}},
	{"programs", []string{"cmd/hindsight", "cmd/hindsightd"}},
	{"tests and the lab (not the product)", []string{"store/storetest", "e2e", "e2e/conformance", "e2e/faults", "e2e/interop",
		"lab/bench", "lab/bench/cmd/relaybench", "lab/bench/cmd/scalebench", "lab/bench/cmd/servebench", "lab/bench/cmd/storescale", "lab/bench/cmd/teamload", "lab/storebench",
		"lab/benchset", "lab/corpus", "lab/platformcheck", "lab/spooltest", "lab/testkit", "lab/testkit/cmd/slowest",
		"lab/testkit/conformance/everything", "lab/testkit/fakeserver", "lab/testkit/otlptest", "lab/testkit/tasktest",
		"lab/testkit/testbin", "lab/testkit/weaviatetest"}},
}

// TestLayers fails when a package imports one of a higher layer, or when a
// package is missing from the table. It reads every package's files for
// each GOOS the project builds on.
func TestLayers(t *testing.T) {
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l.packages {
			layerOf[p] = i
		}
	}
	for rel, imports := range moduleImports(t) {
		own, ok := layerOf[rel]
		if !ok {
			t.Errorf("package %q is in no layer: add it to the table in layers_test.go", rel)
			continue
		}
		for _, target := range imports {
			if l, ok := layerOf[target]; ok && l > own {
				t.Errorf("%q (%s) imports %q (%s), a higher layer", rel, layers[own].name, target, layers[l].name)
			}
		}
	}
}

// TestNoFolderCycle fails when a top-level folder is part of an import
// cycle, its packages taken together as a reader sees them (internal/,
// lab/ and e2e/ each one folder, the root package one too): the folders
// can then be read, and drawn, lowest first.
func TestNoFolderCycle(t *testing.T) {
	folder := func(rel string) string {
		if rel == "" {
			return "(root)"
		}
		top, _, _ := strings.Cut(rel, "/")
		return top
	}
	edges := map[string]map[string]bool{}
	for rel, imports := range moduleImports(t) {
		from := folder(rel)
		for _, target := range imports {
			if to := folder(target); to != from {
				if edges[from] == nil {
					edges[from] = map[string]bool{}
				}
				edges[from][to] = true
			}
		}
	}
	for _, cycle := range cycles(edges) {
		t.Errorf("the folders %s import each other", strings.Join(cycle, ", "))
	}
}

// cycles returns the strongly connected components of more than one node
// of the graph edges (Tarjan's algorithm), each sorted.
func cycles(edges map[string]map[string]bool) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for w := range edges[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 {
			sort.Strings(scc)
			out = append(out, scc)
		}
	}
	nodes := make([]string, 0, len(edges))
	for v := range edges {
		nodes = append(nodes, v)
	}
	sort.Strings(nodes)
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}

// goos are the systems the project builds on; a file for one of them
// counts as much as any other.
var goos = []string{"linux", "darwin", "windows"}

// moduleImports returns, for each package of the module (by its path
// below the module, "" for the root), the module's packages its non-test
// files import on any GOOS of goos. It reads them once for both tests.
func moduleImports(t *testing.T) map[string][]string {
	importsOnce.Do(func() { imports = readImports(t) })
	if imports == nil {
		t.FailNow()
	}
	return imports
}

var (
	importsOnce sync.Once
	imports     map[string][]string
)

func readImports(t *testing.T) map[string][]string {
	out := map[string][]string{}
	for _, dir := range packageDirs(t) {
		rel := filepath.ToSlash(dir)
		if rel == "." {
			rel = ""
		}
		seen := map[string]bool{}
		found := false
		for _, g := range goos {
			ctx := build.Default
			ctx.GOOS = g
			pkg, err := ctx.ImportDir(dir, build.ImportComment)
			if _, ok := err.(*build.NoGoError); ok {
				continue
			}
			if err != nil {
				t.Fatalf("read package %s for %s: %v", dir, g, err)
			}
			found = true
			for _, imp := range pkg.Imports {
				if imp != module && !strings.HasPrefix(imp, module+"/") {
					continue
				}
				if target := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/"); !seen[target] {
					seen[target] = true
					out[rel] = append(out[rel], target)
				}
			}
		}
		if found && out[rel] == nil {
			out[rel] = []string{}
		}
	}
	return out
}

// packageDirs lists the folders of the module that may hold Go code.
func packageDirs(t *testing.T) []string {
	var dirs []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		dirs = append(dirs, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	return dirs
}

// TestCycles: cycles finds the folders that import each other, and only
// those.
func TestCycles(t *testing.T) {
	edges := map[string]map[string]bool{
		"a": {"b": true}, "b": {"c": true, "d": true}, "c": {"a": true},
		"d": {"e": true}, "e": {"d": true}, "f": {"a": true},
	}
	got := fmt.Sprint(cycles(edges))
	if got != "[[d e] [a b c]]" && got != "[[a b c] [d e]]" {
		t.Errorf("cycles = %s; want [a b c] and [d e]", got)
	}
	if got := cycles(map[string]map[string]bool{"a": {"b": true}, "b": {"c": true}}); got != nil {
		t.Errorf("cycles of a chain = %v", got)
	}
}
