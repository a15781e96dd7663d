package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/proxy"
)

func TestParseServe(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string // "" for success
		check   func(t *testing.T, o *serveOptions)
	}{
		{args: []string{"--upstream", "http://127.0.0.1:3001/mcp"}, check: func(t *testing.T, o *serveOptions) {
			if o.name != "127.0.0.1" || o.transport != "auto" || o.listen != "127.0.0.1:8931" {
				t.Errorf("defaults: %+v", o)
			}
		}},
		{args: []string{"--listen", "localhost:0", "--name", "fs", "--", "/usr/bin/server", "--flag", "x"}, check: func(t *testing.T, o *serveOptions) {
			if o.name != "fs" || strings.Join(o.command, " ") != "/usr/bin/server --flag x" {
				t.Errorf("command: %+v", o)
			}
		}},
		{args: []string{"--listen", "[::1]:9000", "--", "srv"}, check: func(t *testing.T, o *serveOptions) {
			if o.name != "srv" {
				t.Errorf("name %q, want srv", o.name)
			}
		}},
		{args: []string{"--session-idle", "90s", "--", "srv"}, check: func(t *testing.T, o *serveOptions) {
			if o.sessionIdle != 90*time.Second {
				t.Errorf("session idle %v, want 90s", o.sessionIdle)
			}
		}},
		{args: []string{"--", "srv"}, check: func(t *testing.T, o *serveOptions) {
			if o.sessionIdle != proxy.DefaultIdleTimeout {
				t.Errorf("session idle %v, want the default %v", o.sessionIdle, proxy.DefaultIdleTimeout)
			}
		}},
		{args: []string{"--pin-tools", "--", "srv"}, check: func(t *testing.T, o *serveOptions) {
			if !o.pinTools {
				t.Error("--pin-tools not set")
			}
		}},
		{args: []string{"--namespace", "team", "--", "srv"}, check: func(t *testing.T, o *serveOptions) {
			if o.pinTools {
				t.Error("pin-tools set by default")
			}
			if o.namespace != "team" {
				t.Errorf("namespace %q, want team", o.namespace)
			}
		}},
		{args: []string{"--upstream", "http://h/mcp", "--upstream-header", "Authorization: Bearer up", "--upstream-header", "X-Team:  blue "}, check: func(t *testing.T, o *serveOptions) {
			if o.headers.Get("Authorization") != "Bearer up" || o.headers.Get("X-Team") != "blue" {
				t.Errorf("headers %v", o.headers)
			}
		}},
		{args: []string{"--listen", "0.0.0.0:8931", "--upstream", "http://h/mcp"}, wantErr: "not a loopback address"},
		{args: []string{"--listen", ":8931", "--upstream", "http://h/mcp"}, wantErr: "--allow-remote"},
		{args: []string{"--listen", "192.168.1.5:8931", "--upstream", "http://h/mcp"}, wantErr: "not a loopback address"},
		{args: []string{"--listen", "0.0.0.0:8931", "--allow-remote", "--upstream", "http://h/mcp"}, wantErr: "--allow-remote needs --auth-token"},
		{args: []string{"--listen", "0.0.0.0:8931", "--allow-remote", "--auth-token", "t", "--upstream", "http://h/mcp"}},
		{args: []string{"--upstream", "http://h/mcp", "--allowed-host", "mcp.internal", "--allowed-host", "box:8931", "--max-sessions", "3", "--max-children", "2", "--body-timeout", "5s", "--replay-events", "16", "--replay-age", "1m"}, check: func(t *testing.T, o *serveOptions) {
			if strings.Join(o.allowedHosts, " ") != "mcp.internal box:8931" || o.maxSessions != 3 || o.maxChildren != 2 || o.bodyTimeout.String() != "5s" ||
				o.replayEvents != 16 || o.replayAge != time.Minute {
				t.Errorf("front door options: %+v", o)
			}
		}},
		{args: []string{"--body-budget", "1048576", "--allowed-origin", "http://localhost:6274", "--allowed-origin", "https://inspector.example", "--", "srv"}, check: func(t *testing.T, o *serveOptions) {
			if o.bodyBudget != 1<<20 || strings.Join(o.allowedOrigins, " ") != "http://localhost:6274 https://inspector.example" {
				t.Errorf("budget %d, origins %v", o.bodyBudget, o.allowedOrigins)
			}
		}},
		{args: []string{"--", "srv"}, check: func(t *testing.T, o *serveOptions) {
			if o.bodyBudget != 0 || o.allowedOrigins != nil {
				t.Errorf("budget %d (want 0: the configuration's or the default), origins %v", o.bodyBudget, o.allowedOrigins)
			}
		}},
		{args: []string{"--allowed-origin", "localhost:6274", "--", "srv"}, wantErr: "--allowed-origin"},
		{args: []string{"--allowed-origin", "http://localhost:6274/app", "--", "srv"}, wantErr: "nothing more"},
		{args: []string{"--allowed-origin", "*", "--", "srv"}, wantErr: "--allowed-origin"},
		{args: []string{}, wantErr: "needs --upstream URL or a command"},
		{args: []string{"--upstream", "http://h/mcp", "--", "srv"}, wantErr: "not both"},
		{args: []string{"--upstream", "ftp://h/mcp"}, wantErr: "http(s) URL"},
		{args: []string{"--upstream", "http://h/mcp", "--upstream-transport", "websocket"}, wantErr: "auto, streamable-http or sse"},
		{args: []string{"--upstream", "http://h/mcp", "--upstream-header", "no colon"}, wantErr: "Name: value"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv("HINDSIGHT_AUTH_TOKEN", "")
			o, err := parseServe(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

func TestParseServeUsageError(t *testing.T) {
	_, err := parseServe([]string{"--listen", "10.0.0.1:1", "--upstream", "http://h/"})
	if !errors.Is(err, errUsage) {
		t.Errorf("a refused address is a usage error (exit 2); got %v", err)
	}
}

// TestOpenLogName: a server name never takes its log out of logs/.
func TestOpenLogName(t *testing.T) {
	root := t.TempDir()
	home := hindsight.Home(root)
	for _, name := range []string{"serve-../../../x", "wrap-/etc/passwd", "../.."} {
		_, c, err := openLog(&globals{home: home, config: &Config{}}, name)
		if err != nil {
			t.Fatalf("openLog(%q): %v", name, err)
		}
		c.Close()
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Dir(p) != home.Logs() {
			t.Errorf("log file outside logs/: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "x.log")); err == nil {
		t.Error("serve-../../../x wrote x.log above the home")
	}
}
