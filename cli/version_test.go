package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

const cliPkg = "github.com/hindsight-proxy/hindsight/cli"

// TestVersionStamped builds the lean binary as `make build` does, with the
// stamp set through -ldflags and VCS stamping off (as a user's GOFLAGS may
// have it), and checks what --version prints.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "hindsight")
	ldflags := "-X " + cliPkg + ".version=v9.8.7-rc1" +
		" -X " + cliPkg + ".commit=0123456789abcdef0123456789abcdef01234567" +
		" -X " + cliPkg + ".date=2026-12-06T10:00:00Z" +
		" -X " + cliPkg + ".modified=true"
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, "./cmd/hindsight")
	build.Dir = testbin.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, arg := range []string{"--version", "version"} {
		out, err := exec.Command(bin, arg).Output()
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if want := "hindsight v9.8.7-rc1 (0123456789ab, 2026-12-06T10:00:00Z, modified)\n"; string(out) != want {
			t.Errorf("%s = %q, want %q", arg, out, want)
		}
	}
}

// TestStamped: a stamped commit replaces the build's VCS settings; no
// stamp leaves them.
func TestStamped(t *testing.T) {
	recorded := &debug.BuildInfo{
		Main:     debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "-trimpath", Value: "true"}, {Key: "vcs.revision", Value: "ffffffffffffffff"}},
	}
	cases := []struct {
		commit, date, modified, set, want string
	}{
		{"", "", "", "", "dev (ffffffffffff)"},
		{"0123456789abcdef", "", "", "", "dev (0123456789ab)"},
		{"0123456789abcdef", "2026-12-06T10:00:00Z", "", "v1.0.0", "v1.0.0 (0123456789ab, 2026-12-06T10:00:00Z)"},
		{"0123456789abcdef", "", "true", "", "dev (0123456789ab, modified)"},
		{"0123456789abcdef", "", "false", "", "dev (0123456789ab)"},
	}
	for _, tc := range cases {
		if got := describeBuild(tc.set, stamped(recorded, tc.commit, tc.date, tc.modified)); got != tc.want {
			t.Errorf("stamp %q %q %q: %q, want %q", tc.commit, tc.date, tc.modified, got, tc.want)
		}
	}
	if recorded.Settings[1].Value != "ffffffffffffffff" {
		t.Error("stamped changed the build information it was given")
	}
}

// TestBuildsStamp: `make build` and the release configuration set every
// part of the stamp.
func TestBuildsStamp(t *testing.T) {
	for _, file := range []string{"Makefile", ".goreleaser.yaml"} {
		b, err := os.ReadFile(filepath.Join(testbin.Root(), file))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"version", "commit", "date", "modified"} {
			if !regexp.MustCompile(`-X\s*` + regexp.QuoteMeta(cliPkg+"."+v) + `=`).Match(b) {
				t.Errorf("%s does not stamp %s.%s", file, cliPkg, v)
			}
		}
		if file == "Makefile" && !strings.Contains(string(b), "-ldflags") {
			t.Errorf("Makefile passes no -ldflags")
		}
	}
}
