package cli

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The build stamp, set at build time by `make build`, the release
// configuration and the Dockerfile with
// -ldflags "-X github.com/hindsight-proxy/hindsight/cli.version=…"
// (and .commit, .date, .modified): the version, the full commit hash, its
// commit time (RFC 3339) and "true" for a work tree with uncommitted
// changes. A value set wins over the build information, which lacks the
// commit when the build ran with -buildvcs=false.
var version, commit, date, modified string

// versionString is the version the binary reports: the stamped version,
// else the main module's version from the build information (what
// `go install …@vX` records), else "dev"; followed by the commit and its
// time, stamped or recorded by the build, as in
// "v1.2.0 (1a2b3c4d5e6f, 2026-11-30T10:00:00Z, modified)". `go run` of a
// checkout without VCS stamping says just "dev".
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	}
	return describeBuild(version, stamped(bi, commit, date, modified))
}

// stamped returns bi with its VCS settings replaced by the stamped commit,
// time and modified flag, when a commit was stamped; else bi unchanged.
func stamped(bi *debug.BuildInfo, commit, date, modified string) *debug.BuildInfo {
	if commit == "" {
		return bi
	}
	c := *bi
	c.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: commit}}
	if date != "" {
		c.Settings = append(c.Settings, debug.BuildSetting{Key: "vcs.time", Value: date})
	}
	if modified != "" {
		c.Settings = append(c.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
	}
	return &c
}

// shortVersion is versionString without the VCS details, for protocol
// fields such as an MCP server's version.
func shortVersion() string {
	v, _, _ := strings.Cut(versionString(), " ")
	return v
}

func orDev(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}

// describeBuild is versionString for a given -X value and build info.
func describeBuild(set string, bi *debug.BuildInfo) string {
	v := set
	if v == "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	v = orDev(v)
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "modified"
			}
		}
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	detail := rev
	for _, s := range []string{at, dirty} {
		if s != "" {
			detail += ", " + s
		}
	}
	return fmt.Sprintf("%s (%s)", v, detail)
}

func versionCmd() *cobra.Command {
	return runs(leaf("version", "print the version", "  hindsight version\n  hindsight --version"),
		func(ctx context.Context, fs *pflag.FlagSet, pos []string) error {
			fmt.Fprintln(stdout, "hindsight", versionString())
			return nil
		})
}
