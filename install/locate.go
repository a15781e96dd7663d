package install

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Clients are the MCP clients whose configurations Install knows, in the
// order it visits them.
var Clients = []string{"claude-desktop", "claude-code", "cursor", "vscode", "windsurf", "codex"}

// Formats of a configuration file, each with its own lists of servers.
const (
	FormatMCPServers = "mcpServers"  // JSON, servers under "mcpServers"
	FormatClaudeCode = "claude.json" // ~/.claude.json: "mcpServers" and "projects.<path>.mcpServers"
	FormatVSCode     = "vscode"      // JSON with comments, servers under "servers"
	FormatCodex      = "codex-toml"  // TOML, [mcp_servers.NAME] tables
)

// Location is one configuration file of one client.
type Location struct {
	Client string `json:"client"`
	Scope  string `json:"scope"` // "user" or "project"
	Path   string `json:"path"`
	Format string `json:"format"`
}

// Env is where to look for configurations: the user's directories and a
// project directory. The command line fills it from the environment.
type Env struct {
	GOOS          string // "linux", "darwin", "windows"
	Home          string // $HOME (%USERPROFILE%)
	XDGConfigHome string // $XDG_CONFIG_HOME, default Home/.config
	AppData       string // %APPDATA% (Windows)
	CodexHome     string // $CODEX_HOME, default Home/.codex
	ClaudeConfig  string // $CLAUDE_CONFIG_DIR, where Claude Code keeps .claude.json; default Home
	Project       string // the project whose .mcp.json, .cursor/ and .vscode/ to include; "" for none
}

// userConfigDir is the platform's per-user application settings directory.
func (e Env) userConfigDir() string {
	switch e.GOOS {
	case "darwin":
		return filepath.Join(e.Home, "Library", "Application Support")
	case "windows":
		if e.AppData != "" {
			return e.AppData
		}
		return filepath.Join(e.Home, "AppData", "Roaming")
	}
	if e.XDGConfigHome != "" {
		return e.XDGConfigHome
	}
	return filepath.Join(e.Home, ".config")
}

// Candidates returns every configuration file the clients may have, present
// or not, in a fixed order.
func (e Env) Candidates(clients []string) []Location {
	var out []Location
	add := func(client, scope, format string, parts ...string) {
		if parts[0] == "" {
			return
		}
		out = append(out, Location{Client: client, Scope: scope, Path: filepath.Join(parts...), Format: format})
	}
	codex := e.CodexHome
	if codex == "" && e.Home != "" {
		codex = filepath.Join(e.Home, ".codex")
	}
	claude := e.ClaudeConfig
	if claude == "" {
		claude = e.Home
	}
	for _, c := range Clients {
		if !slices.Contains(clients, c) {
			continue
		}
		switch c {
		case "claude-desktop":
			add(c, "user", FormatMCPServers, e.userConfigDir(), "Claude", "claude_desktop_config.json")
		case "claude-code":
			add(c, "user", FormatClaudeCode, claude, ".claude.json")
			add(c, "project", FormatMCPServers, e.Project, ".mcp.json")
		case "cursor":
			add(c, "user", FormatMCPServers, e.Home, ".cursor", "mcp.json")
			add(c, "project", FormatMCPServers, e.Project, ".cursor", "mcp.json")
		case "vscode":
			add(c, "user", FormatVSCode, e.userConfigDir(), "Code", "User", "mcp.json")
			add(c, "project", FormatVSCode, e.Project, ".vscode", "mcp.json")
		case "windsurf":
			add(c, "user", FormatMCPServers, e.Home, ".codeium", "windsurf", "mcp_config.json")
		case "codex":
			add(c, "user", FormatCodex, codex, "config.toml")
		}
	}
	return out
}

// Find returns the configuration files of the clients that exist, each
// path once.
func (e Env) Find(clients []string) []Location {
	var out []Location
	seen := map[string]bool{}
	for _, l := range e.Candidates(clients) {
		abs, err := filepath.Abs(l.Path)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(abs); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			if seen[real] {
				continue
			}
			seen[real] = true
		}
		l.Path = abs
		out = append(out, l)
	}
	return out
}

// ParseClients turns a --client value ("all", or names separated by
// commas) into client names.
func ParseClients(s string) ([]string, error) {
	if s == "" || s == "all" {
		return Clients, nil
	}
	var out []string
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(Clients, c) {
			return nil, fmt.Errorf("parse clients: unknown client %q (want %s or all)", c, strings.Join(Clients, ", "))
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}
