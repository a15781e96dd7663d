package cli

import (
	"testing"

	"github.com/hindsight-proxy/hindsight"
)

// TestEnv: the command line reads the variables the libraries no longer
// read, with the meaning docs/configuration.md gives them.
func TestEnv(t *testing.T) {
	t.Setenv("HINDSIGHT_HOME", "/some/where")
	t.Setenv("HINDSIGHT_TASK_ID", "task-7")
	t.Setenv("XDG_CONFIG_HOME", "/xdg")
	t.Setenv("APPDATA", `C:\AppData`)
	t.Setenv("CODEX_HOME", "/codex")
	t.Setenv("CLAUDE_CONFIG_DIR", "/claude")
	if got := envHome(); got != "/some/where" {
		t.Errorf("envHome() = %q with HINDSIGHT_HOME set", got)
	}
	if got := envTaskID(); got != "task-7" {
		t.Errorf("envTaskID() = %q", got)
	}
	e := installEnv("/project")
	if e.XDGConfigHome != "/xdg" || e.AppData != `C:\AppData` || e.CodexHome != "/codex" || e.ClaudeConfig != "/claude" || e.Project != "/project" || e.GOOS == "" {
		t.Errorf("installEnv = %+v", e)
	}
	t.Setenv("HINDSIGHT_HOME", "")
	if got := envHome(); got != hindsight.DefaultHome() {
		t.Errorf("envHome() = %q without HINDSIGHT_HOME, want the default %q", got, hindsight.DefaultHome())
	}
}
