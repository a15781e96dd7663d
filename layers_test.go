package hindsight_test

import (
	"go/build"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
		"internal/badgerdb", "internal/diskspace", "internal/erase", "internal/filelock", "internal/losses",
		"internal/profile", "internal/httpserve", "internal/defaults", "internal/safelog", "demo/exampleserver", "install"}},
	{"wire format", []string{"wire"}},
	{"relay", []string{"proxy"}},
	{"spool", []string{"spool"}},
	{"capture", []string{"capture", "telemetry", "telemetry/otlp", "toolpin"}},
	{"trace store", []string{"traces"}},
	{"learning and giving back", []string{"reflect", "reflect/llm", "inject", "store/embedded", "store/weaviate",
		"store/embedder", "store/embedder/openaiembed"}},
	{"daemon", []string{"daemon"}},
	{"daemon's users", []string{"memserver", "replay", "ui", "eval", "eval/convert", "demo"}},
	{"command line", []string{"cli"}},
	{"programs", []string{"cmd/hindsight", "cmd/hindsightd"}},
	{"tests and the lab (not the product)", []string{"store/storetest", "e2e", "e2e/conformance", "e2e/faults", "e2e/interop",
		"lab/bench", "lab/bench/cmd/relaybench", "lab/bench/cmd/scalebench", "lab/bench/cmd/storescale", "lab/bench/cmd/teamload", "lab/storebench",
		"lab/benchset", "lab/corpus", "lab/platformcheck", "lab/spooltest", "lab/testkit", "lab/testkit/cmd/slowest",
		"lab/testkit/conformance/everything", "lab/testkit/fakeserver", "lab/testkit/otlptest", "lab/testkit/tasktest",
		"lab/testkit/testbin", "lab/testkit/weaviatetest"}},
}

// TestLayers fails when a package imports one of a higher layer, or when a
// package is missing from the table.
func TestLayers(t *testing.T) {
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l.packages {
			layerOf[p] = i
		}
	}
	for _, dir := range packageDirs(t) {
		pkg, err := build.ImportDir(dir, build.ImportComment)
		if _, ok := err.(*build.NoGoError); ok {
			continue
		}
		if err != nil {
			t.Fatalf("read package %s: %v", dir, err)
		}
		rel := filepath.ToSlash(dir)
		if rel == "." {
			rel = ""
		}
		own, ok := layerOf[rel]
		if !ok {
			t.Errorf("package %q is in no layer: add it to the table in layers_test.go", rel)
			continue
		}
		for _, imp := range pkg.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			target := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
			if l, ok := layerOf[target]; ok && l > own {
				t.Errorf("%q (%s) imports %q (%s), a higher layer", rel, layers[own].name, target, layers[l].name)
			}
		}
	}
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
