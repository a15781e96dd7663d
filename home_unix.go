//go:build !windows

package hindsight

import (
	"os"
	"path/filepath"
)

// defaultHome is ~/.hindsight on Linux and macOS alike (a short path: a
// Unix socket's path must fit in 104 bytes on macOS).
func defaultHome() Home {
	if d, err := os.UserHomeDir(); err == nil {
		return Home(filepath.Join(d, ".hindsight"))
	}
	return Home(".hindsight")
}

// restrictDir does nothing on Unix: the directory's mode (0700) is its
// access control.
func restrictDir(dir string) error { return nil }
