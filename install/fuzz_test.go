package install

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fuzzReader checks a configuration reader on any input: it never panics;
// what it accepts, install rewrites into a file the reader accepts again,
// with every stdio server wrapped and every other entry as it was, and
// unwrapping that gives back each server's command line.
func fuzzReader(f *testing.F, format string, seeds ...string) {
	for _, dir := range []string{"configs", "malformed"} {
		ents, _ := os.ReadDir(filepath.Join("testdata", dir))
		for _, e := range ents {
			if formatOf(e.Name()) == format || (format == FormatMCPServers && strings.HasSuffix(e.Name(), ".json")) {
				b, _ := os.ReadFile(filepath.Join("testdata", dir, e.Name()))
				f.Add(b)
			}
		}
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		l := Location{Path: "fuzz", Format: format}
		doc, err := parse(format, "fuzz", src)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz") {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		before := doc.servers()
		r, out := planInstall(l, src, "/bin/hindsight")
		if r.Err != "" {
			t.Fatalf("install failed on a file that parses: %s", r.Err)
		}
		if out == nil {
			return
		}
		doc2, err := parse(format, "fuzz", out)
		if err != nil {
			t.Fatalf("install wrote a file that does not parse: %v\n%s", err, out)
		}
		after := doc2.servers()
		if len(after) != len(before) {
			t.Fatalf("%d servers before install, %d after", len(before), len(after))
		}
		for i, s := range before {
			a := after[i]
			_, was := wrappedAt(s.Command, s.Args)
			if s.Transport == "stdio" && s.Skip == "" && !was {
				want := wrapArgs(s.Name, s.Command, s.Args)
				if a.Command != "/bin/hindsight" || !reflect.DeepEqual(argsOrEmpty(a.Args), want) {
					t.Fatalf("server %q: got %q %q, want /bin/hindsight %q", s.Name, a.Command, a.Args, want)
				}
				continue
			}
			if a.Command != s.Command || !reflect.DeepEqual(argsOrEmpty(a.Args), argsOrEmpty(s.Args)) || a.URL != s.URL {
				t.Fatalf("server %q changed: %q %q -> %q %q", s.Name, s.Command, s.Args, a.Command, a.Args)
			}
		}
		// Uninstall of an edited file (no record): unwrap what install
		// wrapped, and each server is back.
		u, back := planUninstall(l, out, src, "")
		if u.Err != "" {
			t.Fatalf("uninstall: %s", u.Err)
		}
		doc3, err := parse(format, "fuzz", back)
		if err != nil {
			t.Fatalf("uninstall wrote a file that does not parse: %v\n%s", err, back)
		}
		for i, s := range doc3.servers() {
			if s.Command != before[i].Command || !reflect.DeepEqual(s.Args, before[i].Args) {
				t.Fatalf("server %q after uninstall: %q %q, want %q %q", s.Name, s.Command, s.Args, before[i].Command, before[i].Args)
			}
		}
		if !strings.Contains(string(src), "\r") && string(back) != string(src) {
			t.Fatalf("unwrapping did not undo install:\n%s", diff("fuzz", src, back))
		}
	})
}

func FuzzReadJSON(f *testing.F) {
	fuzzReader(f, FormatMCPServers, `{"mcpServers":{"a":{"command":"x","args":[ ]}}}`, `{"mcpServers":{"a":{"command":"x",},}}`)
}

func FuzzReadClaudeCode(f *testing.F) {
	fuzzReader(f, FormatClaudeCode, `{"projects":{"/p":{"mcpServers":{"a":{"command":"x"}}}}}`)
}

func FuzzReadVSCode(f *testing.F) {
	fuzzReader(f, FormatVSCode, "{\"servers\":{\"a\":{/*c*/\"command\":\"x\"//c\n,\"args\":[/*c*/\"y\",]}}}")
}

func FuzzReadTOML(f *testing.F) {
	fuzzReader(f, FormatCodex, "[mcp_servers.a]\ncommand = \"x\"", "[mcp_servers.a]\nargs = [ # c\n]\ncommand = '''x'''\n", "mcp_servers.a.command=\"\\u00e9\"\n")
}
