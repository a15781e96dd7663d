package platformcheck

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The supported systems: both binaries are released, built and vetted for
// each of them.
var (
	wantPairs = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64", "windows/arm64"}
	wantMains = map[string]string{"hindsight": "./cmd/hindsight", "hindsightd": "./cmd/hindsightd"}
)

type releaseConfig struct {
	Version int `yaml:"version"`
	Builds  []struct {
		ID     string   `yaml:"id"`
		Main   string   `yaml:"main"`
		Binary string   `yaml:"binary"`
		Env    []string `yaml:"env"`
		GOOS   []string `yaml:"goos"`
		GOARCH []string `yaml:"goarch"`
		Ignore []any    `yaml:"ignore"`
	} `yaml:"builds"`
	Archives []struct {
		IDs             []string `yaml:"ids"`
		Formats         []string `yaml:"formats"`
		FormatOverrides []struct {
			GOOS    string   `yaml:"goos"`
			Formats []string `yaml:"formats"`
		} `yaml:"format_overrides"`
	} `yaml:"archives"`
	Checksum struct {
		NameTemplate string `yaml:"name_template"`
	} `yaml:"checksum"`
	Snapshot struct {
		VersionTemplate string `yaml:"version_template"`
	} `yaml:"snapshot"`
}

func readRoot(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReleaseConfig checks .goreleaser.yaml's shape, since goreleaser
// itself is not run here: version 2, one build per binary with cgo off for
// the six pairs, every binary archived (zip on Windows), checksums, and a
// snapshot version for local runs.
func TestReleaseConfig(t *testing.T) {
	var c releaseConfig
	dec := yaml.NewDecoder(strings.NewReader(string(readRoot(t, ".goreleaser.yaml"))))
	dec.KnownFields(false)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("parse .goreleaser.yaml: %v", err)
	}
	if c.Version != 2 {
		t.Errorf("version = %d, want 2", c.Version)
	}
	mains := maps.Clone(wantMains)
	ids := map[string]bool{}
	for _, b := range c.Builds {
		want, ok := mains[b.Binary]
		if !ok {
			t.Errorf("build %q: unexpected binary %q", b.ID, b.Binary)
			continue
		}
		if b.Main != want {
			t.Errorf("build %q: main = %q, want %q", b.ID, b.Main, want)
		}
		if !slices.Contains(b.Env, "CGO_ENABLED=0") {
			t.Errorf("build %q: env %v lacks CGO_ENABLED=0", b.ID, b.Env)
		}
		if len(b.Ignore) > 0 {
			t.Errorf("build %q: ignores some pairs: %v", b.ID, b.Ignore)
		}
		var pairs []string
		for _, os := range b.GOOS {
			for _, arch := range b.GOARCH {
				pairs = append(pairs, os+"/"+arch)
			}
		}
		slices.Sort(pairs)
		if !slices.Equal(pairs, wantPairs) {
			t.Errorf("build %q: pairs %v, want %v", b.ID, pairs, wantPairs)
		}
		ids[b.ID] = true
		delete(mains, b.Binary)
	}
	for bin := range mains {
		t.Errorf("no build of %s", bin)
	}
	if len(c.Archives) == 0 {
		t.Fatal("no archives")
	}
	archived := map[string]bool{}
	for _, a := range c.Archives {
		for _, id := range a.IDs {
			archived[id] = true
		}
		zip := false
		for _, o := range a.FormatOverrides {
			zip = zip || (o.GOOS == "windows" && slices.Contains(o.Formats, "zip"))
		}
		if !zip {
			t.Errorf("archive %v: Windows archives are not zip", a.IDs)
		}
	}
	for id := range ids {
		if !archived[id] {
			t.Errorf("build %q is in no archive", id)
		}
	}
	if c.Checksum.NameTemplate == "" {
		t.Error("no checksum file")
	}
	if c.Snapshot.VersionTemplate == "" {
		t.Error("no snapshot version_template: `goreleaser release --snapshot` needs one")
	}
}

// TestCrossPairs checks that `make cross` covers the
// released pairs, and that `make test` runs vet-cross.
func TestCrossPairs(t *testing.T) {
	m := regexp.MustCompile(`(?m)^CROSS_PAIRS\s*:=\s*(.+)$`).FindSubmatch(readRoot(t, "Makefile"))
	if m == nil {
		t.Fatal("Makefile has no CROSS_PAIRS")
	}
	pairs := strings.Fields(string(m[1]))
	slices.Sort(pairs)
	if !slices.Equal(pairs, wantPairs) {
		t.Errorf("CROSS_PAIRS = %v, want %v", pairs, wantPairs)
	}
	if !regexp.MustCompile(`(?m)^test:.*$\n\t.*\.ci/test`).Match(readRoot(t, "Makefile")) {
		t.Error("make test does not run .ci/test")
	}
	if !regexp.MustCompile(`(?m)^phase vet-cross .*\bvet-cross$`).Match(readRoot(t, ".ci/test")) {
		t.Error(".ci/test does not run make vet-cross")
	}
}
