package install

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
)

const testExe = "/usr/local/bin/hindsight"

// formatOf is the format of a fixture, by its name.
func formatOf(name string) string {
	switch {
	case strings.HasSuffix(name, ".claude.json"):
		return FormatClaudeCode
	case strings.HasPrefix(name, "vscode"), strings.HasSuffix(name, ".jsonc"):
		return FormatVSCode
	case strings.HasSuffix(name, ".toml"):
		return FormatCodex
	}
	return FormatMCPServers
}

func fixtures(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	if len(out) == 0 {
		t.Fatalf("no fixtures in %s", dir)
	}
	return out
}

func serversText(r Result) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "action: %s\n", r.Action)
	for _, s := range r.Servers {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s", s.Where, s.Name, s.Transport, s.Status)
		if s.Hint != "" {
			fmt.Fprintf(&b, "\thint: %s", s.Hint)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestInstallGolden rewrites every fixture and compares the new file, the
// diff and the per-server statuses with golden files; installing the
// result again changes nothing.
func TestInstallGolden(t *testing.T) {
	for _, name := range fixtures(t, "testdata/configs") {
		t.Run(name, func(t *testing.T) {
			path := "testdata/configs/" + name
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			l := Location{Client: "test", Scope: "user", Path: path, Format: formatOf(name)}
			r, out := planInstall(l, src, testExe)
			if r.Err != "" {
				t.Fatalf("install: %s", r.Err)
			}
			if out == nil {
				out = src
			}
			testkit.Golden(t, filepath.Join("testdata", "golden", name+".installed"), out)
			testkit.Golden(t, filepath.Join("testdata", "golden", name+".diff"), []byte(r.Diff))
			testkit.Golden(t, filepath.Join("testdata", "golden", name+".servers"), serversText(r))

			// The result parses, every stdio server in it is wrapped,
			// and a second install is a no-op.
			doc, err := parse(l.Format, path, out)
			if err != nil {
				t.Fatalf("the rewritten file does not parse: %v", err)
			}
			for _, s := range doc.servers() {
				if _, ok := wrappedAt(s.Command, s.Args); s.Transport == "stdio" && s.Skip == "" && !ok {
					t.Errorf("server %s is not wrapped: %q %q", s.Name, s.Command, s.Args)
				}
			}
			r2, out2 := planInstall(l, out, testExe)
			if r2.Action != ActionUnchanged || out2 != nil || r2.Diff != "" {
				t.Errorf("second install: action %s, diff:\n%s", r2.Action, r2.Diff)
			}
		})
	}
}

// TestInstallWrapsEachServer checks the meaning of the rewrite against the
// source: command and arguments move behind `hindsight wrap --name NAME --`,
// and nothing else of the entry changes.
func TestInstallWrapsEachServer(t *testing.T) {
	for _, name := range fixtures(t, "testdata/configs") {
		t.Run(name, func(t *testing.T) {
			path := "testdata/configs/" + name
			src, _ := os.ReadFile(path)
			l := Location{Path: path, Format: formatOf(name)}
			before, err := parse(l.Format, path, src)
			if err != nil {
				t.Fatal(err)
			}
			_, out := planInstall(l, src, testExe)
			if out == nil {
				out = src
			}
			after, err := parse(l.Format, path, out)
			if err != nil {
				t.Fatal(err)
			}
			b, a := before.servers(), after.servers()
			if len(a) != len(b) {
				t.Fatalf("%d servers before, %d after", len(b), len(a))
			}
			for i := range b {
				want := b[i]
				if _, wrapped := wrappedAt(want.Command, want.Args); want.Transport == "stdio" && want.Skip == "" && !wrapped {
					want.Args = wrapArgs(want.Name, want.Command, want.Args)
					want.Command = testExe
				}
				if fmt.Sprint(want.Command, want.Args, want.URL, want.Transport, want.Skip) != fmt.Sprint(a[i].Command, argsOrEmpty(a[i].Args), a[i].URL, a[i].Transport, a[i].Skip) &&
					fmt.Sprint(want.Command, argsOrEmpty(want.Args)) != fmt.Sprint(a[i].Command, argsOrEmpty(a[i].Args)) {
					t.Errorf("server %s: got %q %q, want %q %q", want.Name, a[i].Command, a[i].Args, want.Command, want.Args)
				}
			}
		})
	}
}

func argsOrEmpty(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}

// copyFixture copies a fixture into a temporary directory with mode 0640
// and returns its location.
func copyFixture(t *testing.T, name string) (Location, []byte) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, src, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	return Location{Client: "test", Scope: "user", Path: path, Format: formatOf(name)}, src
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestInstallUninstallRestoresBytes installs into a copy of each fixture
// and uninstalls: the file is the original byte for byte, with its mode,
// and neither backup nor record is left.
func TestInstallUninstallRestoresBytes(t *testing.T) {
	for _, name := range fixtures(t, "testdata/configs") {
		t.Run(name, func(t *testing.T) {
			l, orig := copyFixture(t, name)
			r := installFile(l, Options{Exe: testExe})
			if r.Err != "" {
				t.Fatal(r.Err)
			}
			installed := mustRead(t, l.Path)
			if r.Action == ActionWrap {
				if bytes.Equal(installed, orig) {
					t.Fatal("install reported a change but the file is the same")
				}
				if b := mustRead(t, l.Path+BackupSuffix); !bytes.Equal(b, orig) {
					t.Fatal("the backup is not the original")
				}
				if fi, _ := os.Stat(l.Path + BackupSuffix); fi.Mode().Perm() != 0o600 {
					t.Errorf("backup mode %v, want 0600", fi.Mode().Perm())
				}
				if fi, _ := os.Stat(l.Path); fi.Mode().Perm() != 0o640 {
					t.Errorf("config mode %v after install, want 0640", fi.Mode().Perm())
				}
			}
			// Twice is a no-op: same bytes, same backup.
			if r2 := installFile(l, Options{Exe: testExe}); r2.Action != ActionUnchanged {
				t.Errorf("second install: %s %s", r2.Action, r2.Err)
			}
			if !bytes.Equal(mustRead(t, l.Path), installed) {
				t.Error("the second install changed the file")
			}

			u := uninstallFile(l, Options{})
			if u.Err != "" {
				t.Fatal(u.Err)
			}
			if r.Action == ActionWrap && u.Action != ActionRestore {
				t.Errorf("uninstall action %s, want %s", u.Action, ActionRestore)
			}
			if got := mustRead(t, l.Path); !bytes.Equal(got, orig) {
				t.Errorf("uninstall did not restore the original:\n%s", diff(name, orig, got))
			}
			if fi, _ := os.Stat(l.Path); fi.Mode().Perm() != 0o640 {
				t.Errorf("config mode %v after uninstall, want 0640", fi.Mode().Perm())
			}
			for _, p := range []string{l.Path + BackupSuffix, l.Path + RecordSuffix} {
				if exists(p) {
					t.Errorf("%s is left behind", p)
				}
			}
			left, _ := filepath.Glob(filepath.Join(filepath.Dir(l.Path), ".*hindsight*"))
			if len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// userEdits are edits a user makes to an installed file, per fixture: the
// text to find and what to put in its place. Each fixture's edit is one
// install does not touch.
var userEdits = map[string][2]string{
	"claude-desktop.json":     {`"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"`, `"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_rotated"`},
	"claude-code.claude.json": {`"numStartups": 12`, `"numStartups": 13`},
	"project.mcp.json":        {`"cwd":"/home/me/src/app"`, `"cwd":"/home/me/src/app2"`},
	"cursor.json":             {`"SENTRY_TOKEN": "t"`, `"SENTRY_TOKEN": "t2", "EXTRA": "1"`},
	"vscode.jsonc":            {`// runner`, `// runner, edited`},
	"windsurf.json":           {`"disabled": false`, `"disabled": true`},
	"codex.toml":              {`model = "o4-mini"`, "model = \"o3\"\n# a note of my own"},
	"codex-dotted.toml":       {`args = ["a"]`, `args = ["a", "b"]`},
	"codex-table.toml":        {`[mcp_servers]`, "[mcp_servers]\n# mine"},
	"crlf.json":               {`"A": "1"`, `"A": "2"`},
	"crlf.toml":               {"# CRLF", "# CRLF, edited"},
}

// TestUninstallKeepsUserEdits edits an installed file and uninstalls: the
// edit stays, every server install wrapped is unwrapped, and a server the
// original already had wrapped stays wrapped.
func TestUninstallKeepsUserEdits(t *testing.T) {
	for _, name := range fixtures(t, "testdata/configs") {
		t.Run(name, func(t *testing.T) {
			edit, ok := userEdits[name]
			if !ok {
				t.Fatalf("no user edit for fixture %s", name)
			}
			l, orig := copyFixture(t, name)
			if r := installFile(l, Options{Exe: testExe}); r.Err != "" || r.Action != ActionWrap {
				t.Fatalf("install: %s %s", r.Action, r.Err)
			}
			installed := mustRead(t, l.Path)
			if !bytes.Contains(installed, []byte(edit[0])) {
				t.Fatalf("the edit's text %q is not in the installed file", edit[0])
			}
			edited := bytes.Replace(installed, []byte(edit[0]), []byte(edit[1]), 1)
			if err := os.WriteFile(l.Path, edited, 0o640); err != nil {
				t.Fatal(err)
			}
			u := uninstallFile(l, Options{})
			if u.Err != "" || u.Action != ActionUnwrap {
				t.Fatalf("uninstall: %s %s", u.Action, u.Err)
			}
			got := mustRead(t, l.Path)
			// Unwrapping undoes exactly what install inserted.
			want := bytes.Replace(orig, []byte(edit[0]), []byte(edit[1]), 1)
			if !bytes.Equal(got, want) {
				t.Errorf("after uninstall:\n%s", diff(name, want, got))
			}
			for _, p := range []string{l.Path + BackupSuffix, l.Path + RecordSuffix} {
				if exists(p) {
					t.Errorf("%s is left behind", p)
				}
			}
			// The servers wrapped in the original are still wrapped.
			before, _ := parse(l.Format, l.Path, orig)
			after, _ := parse(l.Format, l.Path, got)
			for i, s := range before.servers() {
				_, w1 := wrappedAt(s.Command, s.Args)
				_, w2 := wrappedAt(after.servers()[i].Command, after.servers()[i].Args)
				if w1 != w2 {
					t.Errorf("server %s: wrapped %v before install, %v after uninstall", s.Name, w1, w2)
				}
			}
		})
	}
}

// TestBackupWrittenOnce: a second install after the user added a server
// keeps the first backup, and since that backup lacks the user's server,
// uninstall unwraps instead of restoring it.
func TestBackupWrittenOnce(t *testing.T) {
	l, orig := copyFixture(t, "windsurf.json")
	installFile(l, Options{Exe: testExe})
	installed := mustRead(t, l.Path)
	added := bytes.Replace(installed, []byte(`"remote": {`), []byte(`"added": {"command": "mine", "args": ["--x"]},
    "remote": {`), 1)
	if err := os.WriteFile(l.Path, added, 0o640); err != nil {
		t.Fatal(err)
	}
	r := installFile(l, Options{Exe: testExe})
	if r.Action != ActionWrap || len(r.Servers) != 3 || r.Servers[1].Status != StatusWrapped {
		t.Fatalf("second install: %s %+v", r.Action, r.Servers)
	}
	if b := mustRead(t, l.Path+BackupSuffix); !bytes.Equal(b, orig) {
		t.Error("the second install overwrote the backup")
	}
	if exists(l.Path + RecordSuffix) {
		t.Error("the record survived an install onto an edited file")
	}
	u := uninstallFile(l, Options{})
	if u.Action != ActionUnwrap {
		t.Fatalf("uninstall action %s, want %s", u.Action, ActionUnwrap)
	}
	want := bytes.Replace(orig, []byte(`"remote": {`), []byte(`"added": {"command": "mine", "args": ["--x"]},
    "remote": {`), 1)
	if got := mustRead(t, l.Path); !bytes.Equal(got, want) {
		t.Errorf("after uninstall:\n%s", diff("windsurf.json", want, got))
	}
}

// TestDryRunWritesNothing: install and uninstall with DryRun report a diff
// and leave the directory as it was.
func TestDryRunWritesNothing(t *testing.T) {
	l, orig := copyFixture(t, "codex.toml")
	r := installFile(l, Options{Exe: testExe, DryRun: true})
	if r.Action != ActionWrap || r.Diff == "" {
		t.Fatalf("dry run: %s, diff %q", r.Action, r.Diff)
	}
	if !bytes.Equal(mustRead(t, l.Path), orig) || exists(l.Path+BackupSuffix) || exists(l.Path+RecordSuffix) {
		t.Fatal("a dry run wrote something")
	}
	installFile(l, Options{Exe: testExe})
	installed := mustRead(t, l.Path)
	u := uninstallFile(l, Options{DryRun: true})
	if u.Action != ActionRestore || u.Diff == "" {
		t.Fatalf("uninstall dry run: %s, diff %q", u.Action, u.Diff)
	}
	if !bytes.Equal(mustRead(t, l.Path), installed) || !exists(l.Path+BackupSuffix) {
		t.Fatal("an uninstall dry run wrote something")
	}
}

// TestUninstallWithoutBackup leaves a hand-wrapped file alone.
func TestUninstallWithoutBackup(t *testing.T) {
	l, orig := copyFixture(t, "cursor.json")
	u := uninstallFile(l, Options{})
	if u.Action != ActionUnchanged || u.Err != "" {
		t.Fatalf("uninstall: %s %s", u.Action, u.Err)
	}
	if !bytes.Equal(mustRead(t, l.Path), orig) {
		t.Fatal("uninstall without a backup changed the file")
	}
}

// TestMalformed: a file that does not parse is reported with its name and
// position and left untouched, with no backup.
func TestMalformed(t *testing.T) {
	want := map[string]string{
		"missing-comma.json":         "line 4, column 5",
		"unterminated-comment.jsonc": "line 3",
		"top-array.json":             "the top level is not an object",
		"duplicate-key.toml":         "line 3",
		"unterminated-string.toml":   "line 2",
	}
	for _, name := range fixtures(t, "testdata/malformed") {
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			src := mustRead(t, filepath.Join("testdata", "malformed", name))
			path := filepath.Join(t.TempDir(), name)
			os.WriteFile(path, src, 0o644)
			l := Location{Path: path, Format: formatOf(name)}
			for _, r := range []Result{installFile(l, Options{Exe: testExe}), uninstallFile(l, Options{})} {
				if r.Action != ActionError || !strings.Contains(r.Err, path) || !strings.Contains(r.Err, w) {
					t.Errorf("got %s %q, want an error naming %s and %q", r.Action, r.Err, path, w)
				}
			}
			if !bytes.Equal(mustRead(t, path), src) || exists(path+BackupSuffix) {
				t.Error("a malformed file was touched")
			}
		})
	}
}

// TestSymlinkedConfig: a config that is a symlink (dotfiles) stays a
// symlink; its target is rewritten.
func TestSymlinkedConfig(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles", "mcp.json")
	os.MkdirAll(filepath.Dir(target), 0o755)
	orig := mustRead(t, "testdata/configs/windsurf.json")
	os.WriteFile(target, orig, 0o644)
	link := filepath.Join(dir, "mcp.json")
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	l := Location{Path: link, Format: FormatMCPServers}
	if r := installFile(l, Options{Exe: testExe}); r.Action != ActionWrap {
		t.Fatalf("install: %s %s", r.Action, r.Err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	if bytes.Equal(mustRead(t, target), orig) {
		t.Fatal("the target was not rewritten")
	}
	uninstallFile(l, Options{})
	if !bytes.Equal(mustRead(t, target), orig) {
		t.Fatal("the target was not restored")
	}
}

func TestWrappedAt(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		args []string
		at   int
		ok   bool
	}{
		{"hindsight", []string{"wrap", "--name", "x", "--", "npx", "-y"}, 4, true},
		{`C:\bin\hindsight.exe`, []string{"wrap", "--", "npx"}, 2, true},
		{"/usr/bin/hindsight", []string{"wrap", "--grace", "1s", "--name", "x", "--", "a"}, 6, true},
		{"hindsight", []string{"wrap", "--name", "x", "--"}, 0, false},
		{"hindsight", []string{"serve", "--", "x"}, 0, false},
		{"npx", []string{"wrap", "--", "x"}, 0, false},
		{"hindsightish", []string{"wrap", "--", "x"}, 0, false},
	} {
		at, ok := wrappedAt(c.cmd, c.args)
		if at != c.at || ok != c.ok {
			t.Errorf("wrappedAt(%q, %q) = %d, %v; want %d, %v", c.cmd, c.args, at, ok, c.at, c.ok)
		}
	}
}

// TestWriteAtomicNoticesAConcurrentWrite: when the client rewrote its file
// after install read it, nothing is written and no temporary file stays.
func TestWriteAtomicNoticesAConcurrentWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.json")
	os.WriteFile(path, []byte("client's new bytes"), 0o644)
	err := writeAtomic(path, []byte("ours"), []byte("what install read"))
	if err == nil || !strings.Contains(err.Error(), "changed while") {
		t.Fatalf("got %v, want an error about a concurrent change", err)
	}
	if got := mustRead(t, path); string(got) != "client's new bytes" {
		t.Errorf("the file was overwritten: %q", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left: %v", ents)
	}

	// Through installFile: an error, the file as the client left it, and
	// no backup of a file install never changed.
	l, _ := copyFixture(t, "windsurf.json")
	r, out := planInstall(l, []byte(`{"mcpServers": {"a": {"command": "x"}}}`), testExe)
	if r.Action != ActionWrap || out == nil {
		t.Fatal(r.Err)
	}
	if err := writeAtomic(l.Path, out, []byte("stale")); err == nil {
		t.Fatal("a stale read was written over")
	}
}
