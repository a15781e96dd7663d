package install

import (
	"path/filepath"
	"slices"
	"strings"
)

// wrapArgs returns the arguments that run command with args through
// `hindsight wrap --name NAME --`: the hindsight executable becomes the
// command and the original command line follows the "--".
func wrapArgs(name, command string, args []string) []string {
	return append([]string{"wrap", "--name", name, "--", command}, args...)
}

// IsHindsight reports whether command names a hindsight executable (how
// install and uninstall recognise an entry already wrapped): its base
// name, less ".exe", is "hindsight" or "hindsightd", or starts with
// "hindsight-".
func IsHindsight(command string) bool {
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(filepath.ToSlash(command))), ".exe")
	if i := strings.LastIndexAny(base, `\/`); i >= 0 {
		base = base[i+1:]
	}
	return base == "hindsight" || base == "hindsightd" || strings.HasPrefix(base, "hindsight-")
}

// wrappedAt reports whether command and args run a server through
// `hindsight wrap … --`, and if so where the wrapped command is in args
// (the index after "--").
func wrappedAt(command string, args []string) (int, bool) {
	if !IsHindsight(command) || len(args) == 0 || args[0] != "wrap" {
		return 0, false
	}
	i := slices.Index(args, "--")
	if i < 0 || i+1 >= len(args) {
		return 0, false
	}
	return i + 1, true
}
