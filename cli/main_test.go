package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/hindsight-proxy/hindsight/lab/testkit"
	"github.com/hindsight-proxy/hindsight/lab/testkit/testbin"
	"golang.org/x/term"
)

// runCLI runs the command line in this process and returns its exit
// status, stdout and stderr. Only commands that start no daemon run here.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	saved := stdout
	stdout = &out
	defer func() { stdout = saved }()
	t.Setenv("HINDSIGHT_HOME", t.TempDir())
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	shape := regexp.MustCompile(`^hindsight \S+( \([0-9a-f]{1,12}(, [^,()]+)*\))?\n$`)
	code, flagOut, _ := runCLI(t, "--version")
	if code != 0 || !shape.MatchString(flagOut) {
		t.Errorf("--version: exit %d, %q", code, flagOut)
	}
	code, cmdOut, _ := runCLI(t, "version")
	if code != 0 || cmdOut != flagOut {
		t.Errorf("version: exit %d, %q; --version said %q", code, cmdOut, flagOut)
	}
	if v := shortVersion(); v == "" || !strings.HasPrefix(flagOut, "hindsight "+v) || strings.ContainsAny(v, " ()") {
		t.Errorf("shortVersion() = %q beside %q", v, flagOut)
	}
}

func TestDescribeBuild(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-30T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	cases := []struct {
		set, main string
		settings  []debug.BuildSetting
		want      string
	}{
		{"", "(devel)", nil, "dev"},
		{"", "v1.4.0", nil, "v1.4.0"},
		{"v9.9.9-rc1", "v1.4.0", nil, "v9.9.9-rc1"},
		{"", "(devel)", vcs, "dev (0123456789ab, 2026-11-30T10:00:00Z, modified)"},
		{"v2.0.0", "(devel)", vcs[:1], "v2.0.0 (0123456789ab)"},
	}
	for _, tc := range cases {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.main}, Settings: tc.settings}
		if got := describeBuild(tc.set, bi); got != tc.want {
			t.Errorf("describeBuild(%q, %q, %v) = %q, want %q", tc.set, tc.main, tc.settings, got, tc.want)
		}
	}
}

// TestHelp: the help lists every command a user runs, and no internal one.
func TestHelp(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	testkit.Golden(t, filepath.Join("testdata", "help.txt"), out)
	if strings.Contains(out, "example-server") {
		t.Error("help lists the hidden example-server")
	}
	code, out, _ = runCLI(t, "help", "experiences", "search")
	if code != 0 {
		t.Fatalf("help experiences search: exit %d", code)
	}
	testkit.Golden(t, filepath.Join("testdata", "help-experiences-search.txt"), out)
	// Hidden is not gone.
	if code, _, errOut := runCLI(t, "example-server", "extra"); code != 2 || !strings.Contains(errOut, "example-server takes no arguments") {
		t.Errorf("example-server extra: exit %d, %q", code, errOut)
	}
}

// TestCompletion: each shell gets a script, and the completions it asks
// for name the commands and flags, hidden ones left out.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errOut := runCLI(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "__complete") || !strings.Contains(out, "hindsight") {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, code, len(out), errOut)
		}
	}
	complete := func(args ...string) []string {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"__complete"}, args...)...)
		if code != 0 {
			t.Fatalf("__complete %q: exit %d: %s", args, code, errOut)
		}
		var names []string
		for _, l := range strings.Split(out, "\n") {
			if l == "" || strings.HasPrefix(l, ":") {
				continue
			}
			names = append(names, strings.SplitN(l, "\t", 2)[0])
		}
		return names
	}
	top := complete("")
	testkit.Golden(t, filepath.Join("testdata", "complete-top.txt"), strings.Join(top, "\n")+"\n")
	for _, want := range []string{"wrap", "serve", "traces", "experiences", "completion", "daemon"} {
		if !slices.Contains(top, want) {
			t.Errorf("completions %q lack %s", top, want)
		}
	}
	if slices.Contains(top, "example-server") {
		t.Error("completion offers the hidden example-server")
	}
	if got := complete("traces", ""); !slices.Equal(got, []string{"export", "help", "import", "list", "purge", "show"}) && !slices.Equal(got, []string{"export", "import", "list", "purge", "show"}) {
		t.Errorf("traces subcommands: %q", got)
	}
	if got := complete("experiences", "search", "--t"); !slices.Equal(got, []string{"--task-type", "--tool"}) {
		t.Errorf("experiences search --t: %q", got)
	}
	if got := complete("traces", "list", "--h"); !slices.Contains(got, "--home") {
		t.Errorf("traces list --h: %q lacks the global --home", got)
	}
}

// TestUsageErrors: a wrong command line exits 2, saying what is wrong,
// before anything runs.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"traces"}, "traces needs a subcommand"},
		{[]string{"traces", "bogus"}, `traces: unknown subcommand "bogus"`},
		{[]string{"traces", "list", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"traces", "list", "--limit", "x"}, `invalid argument "x"`},
		{[]string{"--home"}, "flag needs an argument"},
		{[]string{"experiences", "search"}, "experiences search needs a query"},
		{[]string{"status", "extra"}, "status takes no arguments"},
		{[]string{"wrap", "--name", "x"}, "wrap needs the server's command"},
		{[]string{"serve", "--listen", "10.0.0.1:1", "--upstream", "http://h/"}, "not a loopback address"},
	}
	for _, tc := range cases {
		code, _, errOut := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("hindsight %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestFlagsAnywhere: a command's flags and the global ones parse before
// or after positional arguments; after --, nothing is a flag.
func TestFlagsAnywhere(t *testing.T) {
	cases := []struct {
		args      []string
		pos       []string
		tool      string
		k         int
		json      bool
		home      string
		dashAfter int
	}{
		{args: []string{"read file", "--tool", "read_file"}, pos: []string{"read file"}, tool: "read_file", k: 5, dashAfter: -1},
		{args: []string{"--json", "a", "-k", "2", "b", "--home", "/h"}, pos: []string{"a", "b"}, k: 2, json: true, home: "/h", dashAfter: -1},
		{args: []string{"a", "--", "--tool", "x"}, pos: []string{"a", "--tool", "x"}, k: 5, dashAfter: 1},
		{args: nil, pos: []string{}, k: 5, dashAfter: -1},
	}
	for _, tc := range cases {
		root, _ := newRoot()
		c, rest, err := root.Find(append([]string{"experiences", "search"}, tc.args...))
		if err != nil || c.Name() != "search" {
			t.Fatalf("%q: found %s, %v", tc.args, c.Name(), err)
		}
		if err := c.ParseFlags(rest); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		fs := c.Flags()
		tool, _ := fs.GetString("tool")
		k, _ := fs.GetInt("k")
		asJSON, _ := fs.GetBool("json")
		home, _ := fs.GetString("home")
		if pos := fs.Args(); !slices.Equal(pos, tc.pos) || tool != tc.tool || k != tc.k || asJSON != tc.json || home != tc.home || c.ArgsLenAtDash() != tc.dashAfter {
			t.Errorf("%q: pos %q tool %q k %d json %v home %q dash %d", tc.args, pos, tool, k, asJSON, home, c.ArgsLenAtDash())
		}
	}
}

// TestServePassthrough: serve's command after -- (or after its first
// argument) reaches the child whole, flag-like arguments too.
func TestServePassthrough(t *testing.T) {
	child := []string{"node", "srv.js", "--home", "x", "-v", "--", "--listen", "y"}
	for _, args := range [][]string{
		append([]string{"--listen", "127.0.0.1:0", "--"}, child...),
		append([]string{"--name", "n"}, child...),
	} {
		root, _ := newRoot()
		c, rest, err := root.Find(append([]string{"serve"}, args...))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ParseFlags(rest); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got := c.Flags().Args(); !slices.Equal(got, child) {
			t.Errorf("serve %q: the child gets %q, want %q", args, got, child)
		}
		o, err := parseServe(args)
		if err != nil || !slices.Equal(o.command, child) {
			t.Errorf("parseServe(%q) = %v, %v", args, o, err)
		}
	}
}

// TestWrapPassthrough: the real binary starts wrap's child with every
// argument after -- as given, flag-like ones included, and takes the
// global --home after the command.
func TestWrapPassthrough(t *testing.T) {
	home, got := t.TempDir(), filepath.Join(t.TempDir(), "args")
	testbin.StopDaemon(t, home)
	child := []string{"--home", "x", "-v", "--", "-q", "--name=y"}
	args := append([]string{"wrap", "--name", "args", "--home", home, "--", "sh", "-c", `printf '%s\n' "$@" > "$0"`, got}, child...)
	cmd := exec.Command(testbin.Hindsight(t), args...)
	cmd.Env = append(os.Environ(), "HINDSIGHT_CAPTURE=off", "HINDSIGHT_HOME="+t.TempDir())
	cmd.Stdin = strings.NewReader("")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wrap: %v\n%s", err, out)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); !slices.Equal(lines, child) {
		t.Errorf("the child got %q, want %q", lines, child)
	}
	if _, err := os.Stat(filepath.Join(home, "logs", "wrap-args.log")); err != nil {
		t.Errorf("--home after wrap was not the home: %v", err)
	}
}

// TestHomeAfterCommand: `traces list --home DIR` asks the daemon of DIR
// (starting it there), not the one of $HINDSIGHT_HOME.
func TestHomeAfterCommand(t *testing.T) {
	home, other := t.TempDir(), t.TempDir()
	testbin.StopDaemon(t, home)
	testbin.StopDaemon(t, other)
	cmd := exec.Command(testbin.Hindsight(t), "traces", "list", "--home", home, "--json")
	cmd.Env = append(os.Environ(), "HINDSIGHT_HOME="+other)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("traces list --home: %v", err)
	}
	if strings.TrimSpace(string(out)) != "[]" {
		t.Errorf("traces list --json in a new home: %q", out)
	}
	if _, err := os.Stat(filepath.Join(home, "daemon.lock")); err != nil {
		t.Errorf("no daemon ran in --home: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, "daemon.lock")); err == nil {
		t.Error("a daemon ran in $HINDSIGHT_HOME despite --home")
	}
}

// TestLineCounter: the counter passes bytes through unchanged, reading
// and writing, with or without a bar; scripts (stderr no terminal) get no
// bar.
func TestLineCounter(t *testing.T) {
	if b := newBar(true, "x", 10); b != nil {
		t.Error("a bar despite quiet")
	}
	if b := newBar(false, "x", 10); b != nil && !term.IsTerminal(int(os.Stderr.Fd())) {
		t.Error("a bar on a stderr that is no terminal")
	}
	src := "a\nb\n\nc"
	got, err := io.ReadAll(lineCounter{r: strings.NewReader(src)})
	if err != nil || string(got) != src {
		t.Errorf("read %q, %v", got, err)
	}
	var w bytes.Buffer
	if _, err := (lineCounter{w: &w}).Write([]byte(src)); err != nil || w.String() != src {
		t.Errorf("wrote %q, %v", w.String(), err)
	}
	if n := countLines([]byte(src)); n != 3 {
		t.Errorf("countLines = %d", n)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(strings.Repeat("x\n", 70000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := countFileLines(path); n != 70000 {
		t.Errorf("countFileLines = %d", n)
	}
}

// FuzzWrapCommandLine: whatever follows --, flag-like or not, is the
// child's command line, word for word.
func FuzzWrapCommandLine(f *testing.F) {
	f.Add("node", "--home", "-v")
	f.Add("-q", "--", "--name=x")
	f.Add("", "-", "--help")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		child := []string{a, b, c}
		root, _ := newRoot()
		cmd, rest, err := root.Find(append([]string{"wrap", "--name", "n", "--"}, child...))
		if err != nil || cmd.Name() != "wrap" {
			t.Fatalf("find wrap: %v", err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatalf("parse %q: %v", child, err)
		}
		if got := cmd.Flags().Args(); !slices.Equal(got, child) {
			t.Errorf("the child gets %q, want %q", got, child)
		}
	})
}
