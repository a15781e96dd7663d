package platformcheck

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makePairs reads a pair list (NAME := os/arch …) from the Makefile.
func makePairs(t *testing.T, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(.+)$`).FindSubmatch(readRoot(t, "Makefile"))
	if m == nil {
		t.Fatalf("Makefile has no %s", name)
	}
	return strings.Fields(string(m[1]))
}

// buildContext is how the release (cgo off) or the race-enabled tests see
// a pair.
func buildContext(pair string, tags ...string) build.Context {
	c := build.Default
	c.GOOS, c.GOARCH, _ = strings.Cut(pair, "/")
	c.CgoEnabled = false
	c.BuildTags = tags
	return c
}

// TestVetPairsCoverEveryFile: `make vet-cross` vets fewer pairs than are
// released, so every Go file of the module (tests included) that some
// released pair compiles, with or without the race and purego tags, must
// be compiled by at least one vetted pair: no file of a released system
// goes unchecked.
func TestVetPairsCoverEveryFile(t *testing.T) {
	release, vet := makePairs(t, "CROSS_PAIRS"), makePairs(t, "VET_PAIRS")
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "node_modules" || name == "bin" || name == "dist"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".s") {
			return nil
		}
		dir, name := filepath.Split(path)
		for _, tags := range [][]string{nil, {"race"}, {"purego"}} {
			released := ""
			for _, p := range release {
				c := buildContext(p, tags...)
				if ok, err := c.MatchFile(dir, name); err != nil {
					t.Fatalf("match %s: %v", path, err)
				} else if ok {
					released = p
					break
				}
			}
			if released == "" {
				continue
			}
			files++
			vetted := false
			for _, p := range vet {
				c := buildContext(p, tags...)
				if ok, _ := c.MatchFile(dir, name); ok {
					vetted = true
					break
				}
			}
			if !vetted {
				t.Errorf("%s (tags %v) is compiled for %s but by no pair of VET_PAIRS %v", path, tags, released, vet)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d files seen: the walk missed the module", files)
	}
}
