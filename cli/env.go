package cli

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/install"
	"github.com/hindsight-proxy/hindsight/internal/diskspace"
)

// The environment variables the command line reads for the libraries,
// which take their values as parameters and fields (docs/configuration.md
// lists them all). Each is read when a command needs it, once per run.

// envHome is the home directory: $HINDSIGHT_HOME, else the system's
// default (hindsight.DefaultHome).
func envHome() hindsight.Home {
	if h := os.Getenv("HINDSIGHT_HOME"); h != "" {
		return hindsight.Home(h)
	}
	return hindsight.DefaultHome()
}

// envTaskID is the explicit task a stdio sidecar's sessions name:
// $HINDSIGHT_TASK_ID ("" for none).
func envTaskID() string { return os.Getenv("HINDSIGHT_TASK_ID") }

// installEnv is where `hindsight install` looks for the agents'
// configurations: the user's directories from the environment, and
// project.
func installEnv(project string) install.Env {
	home, _ := os.UserHomeDir()
	return install.Env{
		GOOS:          runtime.GOOS,
		Home:          home,
		XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"),
		AppData:       os.Getenv("APPDATA"),
		CodexHome:     os.Getenv("CODEX_HOME"),
		ClaudeConfig:  os.Getenv("CLAUDE_CONFIG_DIR"),
		Project:       project,
	}
}

// envDiskReserve is the free space below which sidecars and the daemon
// stop writing to Badger: $HINDSIGHT_DISK_RESERVE, in bytes (k, m, g
// suffixes in powers of 1024), as the libraries' DiskReserve options take
// it: 0 when unset (each keeps its default), negative for "0" (no check).
// A value that is not a byte count is an error.
func envDiskReserve() (int64, error) {
	v := strings.TrimSpace(os.Getenv("HINDSIGHT_DISK_RESERVE"))
	if v == "" {
		return 0, nil
	}
	n, err := diskspace.ParseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("read HINDSIGHT_DISK_RESERVE: %w", err)
	}
	if n == 0 {
		return -1, nil
	}
	return n, nil
}
