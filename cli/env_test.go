package cli

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
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

// TestEnvDiskReserve: HINDSIGHT_DISK_RESERVE reaches the libraries as
// their DiskReserve options ("0" turns the check off, unset keeps their
// defaults), overrides outbox.disk_reserve, and a value that is not a
// byte count is an error.
func TestEnvDiskReserve(t *testing.T) {
	for v, want := range map[string]int64{"": 0, "0": -1, "3m": 3 << 20, " 512 ": 512} {
		t.Setenv("HINDSIGHT_DISK_RESERVE", v)
		if got, err := envDiskReserve(); err != nil || got != want {
			t.Errorf("envDiskReserve() with %q = %d, %v; want %d", v, got, err, want)
		}
	}
	t.Setenv("HINDSIGHT_DISK_RESERVE", "lots")
	if _, err := envDiskReserve(); err == nil || !strings.Contains(err.Error(), "HINDSIGHT_DISK_RESERVE") {
		t.Errorf("envDiskReserve() with lots: %v, want an error naming the variable", err)
	}
	g := &globals{config: &Config{}}
	g.config.Outbox.DiskReserve = 1 << 20
	if got := g.outboxReserve(); got != 1<<20 {
		t.Errorf("outboxReserve() unset = %d, want outbox.disk_reserve", got)
	}
	g.diskReserve = -1
	if got := g.outboxReserve(); got != -1 {
		t.Errorf("outboxReserve() with the variable at 0 = %d, want -1 (no check)", got)
	}
}

// TestEnvDiskReserveReachesDaemon runs `hindsight daemon` with
// HINDSIGHT_DISK_RESERVE above any disk: it refuses to open its stores.
// A value that is not a byte count is reported and the defaults kept: a
// command still runs.
func TestEnvDiskReserveReachesDaemon(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(testbin.Hindsight(t), "daemon")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home, "HINDSIGHT_DISK_RESERVE=1000000g")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "disk space low") {
		t.Errorf("hindsight daemon with HINDSIGHT_DISK_RESERVE=1000000g: %v, output %q; want it to fail saying disk space low", err, out)
	}
	cmd = exec.Command(testbin.Hindsight(t), "status")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+home, "HINDSIGHT_DISK_RESERVE=lots")
	out, _ := cmd.CombinedOutput() // exits 1: no daemon runs in home
	if !strings.Contains(string(out), "outboxes") || !strings.Contains(string(out), "read HINDSIGHT_DISK_RESERVE") || !strings.Contains(string(out), "default reserve is kept") {
		t.Errorf("hindsight status with HINDSIGHT_DISK_RESERVE=lots: output %q; want it to run, saying the value was not read", out)
	}
}
