package install

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestCandidates pins where each client's configuration is looked for on
// each platform.
func TestCandidates(t *testing.T) {
	for _, c := range []struct {
		env  Env
		want []string
	}{
		{Env{GOOS: "linux", Home: "/h", Project: "/p"}, []string{
			"/h/.config/Claude/claude_desktop_config.json",
			"/h/.claude.json", "/p/.mcp.json",
			"/h/.cursor/mcp.json", "/p/.cursor/mcp.json",
			"/h/.config/Code/User/mcp.json", "/p/.vscode/mcp.json",
			"/h/.codeium/windsurf/mcp_config.json",
			"/h/.codex/config.toml",
		}},
		{Env{GOOS: "linux", Home: "/h", XDGConfigHome: "/x", CodexHome: "/c", ClaudeConfig: "/cc"}, []string{
			"/x/Claude/claude_desktop_config.json",
			"/cc/.claude.json",
			"/h/.cursor/mcp.json",
			"/x/Code/User/mcp.json",
			"/h/.codeium/windsurf/mcp_config.json",
			"/c/config.toml",
		}},
		{Env{GOOS: "darwin", Home: "/Users/me"}, []string{
			"/Users/me/Library/Application Support/Claude/claude_desktop_config.json",
			"/Users/me/.claude.json",
			"/Users/me/.cursor/mcp.json",
			"/Users/me/Library/Application Support/Code/User/mcp.json",
			"/Users/me/.codeium/windsurf/mcp_config.json",
			"/Users/me/.codex/config.toml",
		}},
		{Env{GOOS: "windows", Home: "/u", AppData: "/u/AppData/Roaming"}, []string{
			"/u/AppData/Roaming/Claude/claude_desktop_config.json",
			"/u/.claude.json",
			"/u/.cursor/mcp.json",
			"/u/AppData/Roaming/Code/User/mcp.json",
			"/u/.codeium/windsurf/mcp_config.json",
			"/u/.codex/config.toml",
		}},
	} {
		var got []string
		for _, l := range c.env.Candidates(Clients) {
			got = append(got, filepath.ToSlash(l.Path))
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v:\ngot  %q\nwant %q", c.env, got, c.want)
		}
	}
}

// TestFind lays out a home and a project and finds the files present, each
// once, for the clients asked for.
func TestFind(t *testing.T) {
	root := t.TempDir()
	home, project := filepath.Join(root, "home"), filepath.Join(root, "proj")
	files := map[string]string{
		"home/.config/Claude/claude_desktop_config.json": "claude-desktop.json",
		"home/.claude.json":       "claude-code.claude.json",
		"home/.cursor/mcp.json":   "cursor.json",
		"home/.codex/config.toml": "codex.toml",
		"proj/.mcp.json":          "project.mcp.json",
		"proj/.vscode/mcp.json":   "vscode.jsonc",
	}
	for rel, fixture := range files {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, mustRead(t, filepath.Join("testdata", "configs", fixture)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(home, ".codeium", "windsurf", "mcp_config.json"), 0o755) // a directory, not a file
	env := Env{GOOS: "linux", Home: home, Project: project}

	var got []string
	for _, l := range env.Find(Clients) {
		rel, _ := filepath.Rel(root, l.Path)
		got = append(got, l.Client+" "+l.Scope+" "+filepath.ToSlash(rel)+" "+l.Format)
	}
	want := []string{
		"claude-desktop user home/.config/Claude/claude_desktop_config.json mcpServers",
		"claude-code user home/.claude.json claude.json",
		"claude-code project proj/.mcp.json mcpServers",
		"cursor user home/.cursor/mcp.json mcpServers",
		"vscode project proj/.vscode/mcp.json vscode",
		"codex user home/.codex/config.toml codex-toml",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	// The project is the home: ~/.cursor/mcp.json is found once.
	env.Project = home
	n := 0
	for _, l := range env.Find([]string{"cursor"}) {
		if l.Client == "cursor" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("cursor's file found %d times with the project at home", n)
	}
}

func TestParseClients(t *testing.T) {
	if got, _ := ParseClients("all"); !reflect.DeepEqual(got, Clients) {
		t.Errorf("all = %q", got)
	}
	if got, _ := ParseClients("codex, cursor,codex"); !reflect.DeepEqual(got, []string{"codex", "cursor"}) {
		t.Errorf("codex, cursor,codex = %q", got)
	}
	if _, err := ParseClients("emacs"); err == nil {
		t.Error("an unknown client was accepted")
	}
}
