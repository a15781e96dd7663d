package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/install"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
)

// installTree lays out a home and a project with the install package's
// fixtures and returns their paths and the files by path.
func installTree(t *testing.T) (home, project string, files map[string][]byte) {
	t.Helper()
	root := t.TempDir()
	home, project = filepath.Join(root, "home"), filepath.Join(root, "project")
	fixtures := filepath.Join(testbin.Root(), "install", "testdata", "configs")
	files = map[string][]byte{}
	for rel, fixture := range map[string]string{
		"home/.config/Claude/claude_desktop_config.json": "claude-desktop.json",
		"home/.claude.json":                      "claude-code.claude.json",
		"home/.cursor/mcp.json":                  "cursor.json",
		"home/.codeium/windsurf/mcp_config.json": "windsurf.json",
		"home/.codex/config.toml":                "codex.toml",
		"project/.mcp.json":                      "project.mcp.json",
		"project/.vscode/mcp.json":               "vscode.jsonc",
	} {
		b, err := os.ReadFile(filepath.Join(fixtures, fixture))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files[p] = b
	}
	return home, project, files
}

// runHindsight runs the real binary in dir with HOME at home and returns
// its stdout, stderr and exit status.
func runHindsight(t *testing.T, dir, home string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testbin.Hindsight(t), args...)
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "HOME", "XDG_CONFIG_HOME", "APPDATA", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "HINDSIGHT_HOME":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "HOME="+home, "HINDSIGHT_HOME="+filepath.Join(home, ".hindsight"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestInstallCommand drives `hindsight install` and `uninstall` through
// the real binary against a home laid out with every client's config.
func TestInstallCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the hindsight binary")
	}
	home, project, files := installTree(t)
	same := func(when string) {
		t.Helper()
		for p, want := range files {
			if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
				t.Errorf("%s: %s differs from the original", when, p)
			}
			if _, err := os.Stat(p + install.BackupSuffix); err == nil {
				t.Errorf("%s: %s has a backup", when, p)
			}
		}
	}

	out, errOut, code := runHindsight(t, project, home, "install", "--dry-run")
	if code != 0 {
		t.Fatalf("install --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"would wrap", "+++ " + filepath.Join(home, ".cursor", "mcp.json"), "--upstream https://mcp.notion.com/mcp --name notion", "hindsight serve --listen 127.0.0.1:8931 ", "dry run: nothing was written"} {
		if !strings.Contains(out, want) {
			t.Errorf("install --dry-run output lacks %q:\n%s", want, out)
		}
	}
	same("after --dry-run")

	out, errOut, code = runHindsight(t, project, home, "install", "--json")
	if code != 0 {
		t.Fatalf("install --json: exit %d\n%s%s", code, out, errOut)
	}
	var res struct {
		Hindsight string           `json:"hindsight"`
		Files     []install.Result `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("install --json: %v\n%s", err, out)
	}
	exe, _ := filepath.EvalSymlinks(testbin.Hindsight(t))
	if got, _ := filepath.EvalSymlinks(res.Hindsight); got != exe {
		t.Errorf("the hindsight written is %q, want this binary %q", res.Hindsight, exe)
	}
	if len(res.Files) != len(files) {
		t.Fatalf("install touched %d files, want %d: %+v", len(res.Files), len(files), res.Files)
	}
	for _, f := range res.Files {
		if f.Action != install.ActionWrap {
			t.Errorf("%s: action %s %s", f.Path, f.Action, f.Err)
		}
		fi, err := os.Stat(f.Path + install.BackupSuffix)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: backup %v %v", f.Path, fi, err)
		}
		if b, _ := os.ReadFile(f.Path); !bytes.Contains(b, []byte(res.Hindsight)) {
			t.Errorf("%s does not run %s", f.Path, res.Hindsight)
		}
	}

	out, errOut, code = runHindsight(t, project, home, "install")
	if code != 0 || strings.Count(out, "nothing to change") != len(files) {
		t.Errorf("second install: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = runHindsight(t, project, home, "uninstall")
	if code != 0 || strings.Count(out, "restore the backup") != len(files) {
		t.Errorf("uninstall: exit %d\n%s%s", code, out, errOut)
	}
	same("after uninstall")
}

// TestInstallCommandErrors: a malformed file is named with its position
// and left alone while the others are installed; a bad --client is a
// usage error; a home with no configs says where it looked.
func TestInstallCommandErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the hindsight binary")
	}
	home, project, files := installTree(t)
	bad := filepath.Join(home, ".cursor", "mcp.json")
	broken := []byte("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": {}\n  }\n}\n")
	os.WriteFile(bad, broken, 0o644)

	out, errOut, code := runHindsight(t, project, home, "install", "--client", "cursor,codex")
	if code != 1 || !strings.Contains(out, bad) || !strings.Contains(out, "line 4, column 5") || !strings.Contains(errOut, "1 of 2 files left untouched") {
		t.Errorf("install with a malformed file: exit %d\n%s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(bad); !bytes.Equal(b, broken) {
		t.Error("the malformed file was changed")
	}
	codex := filepath.Join(home, ".codex", "config.toml")
	if b, _ := os.ReadFile(codex); bytes.Equal(b, files[codex]) {
		t.Error("codex's config was not installed beside the malformed one")
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".claude.json")); !bytes.Equal(b, files[filepath.Join(home, ".claude.json")]) {
		t.Error("--client cursor,codex changed Claude Code's config")
	}

	if _, errOut, code := runHindsight(t, project, home, "install", "--client", "emacs"); code != 2 || !strings.Contains(errOut, "emacs") {
		t.Errorf("--client emacs: exit %d %s", code, errOut)
	}

	if _, errOut, code := runHindsight(t, project, home, "install", "--hindsight", "/usr/bin/hs"); code != 2 || !strings.Contains(errOut, "must be hindsight") {
		t.Errorf("--hindsight /usr/bin/hs: exit %d %s", code, errOut)
	}

	empty := t.TempDir()
	out, _, code = runHindsight(t, empty, empty, "install")
	if code != 0 || !strings.Contains(out, "no MCP client configuration found") || !strings.Contains(out, filepath.Join(empty, ".codex", "config.toml")) {
		t.Errorf("install in an empty home: exit %d\n%s", code, out)
	}
}
