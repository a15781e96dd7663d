package cli

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with
// -ldflags "-X github.com/hindsight-proxy/hindsight/internal/cli.version=…";
// when set it wins over the build information.
var version = ""

// versionString is the version the binary reports: the -X value, else the
// main module's version from the build information (or "dev"), followed
// by the VCS revision and commit time when the build recorded them, as
// in "v1.2.0 (1a2b3c4d5e6f, 2026-11-30T10:00:00Z, modified)".
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return orDev(version)
	}
	return describeBuild(version, bi)
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
