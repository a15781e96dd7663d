package reflect

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/hindsight-proxy/hindsight"
	"github.com/hindsight-proxy/hindsight/guard"
)

// Reasons a candidate is refused as an attempt to reach an agent's
// instructions rather than a lesson about a tool (see poisoned).
const (
	DropManipulation = guard.ReasonManipulation // talks to the agent about its own instructions or data
	DropCredential   = guard.ReasonCredential   // moves secrets somewhere, or is built on one
	DropURL          = "url"                    // names a URL or host no cited call of the server used
	DropPath         = "path"                   // names a file path no cited call of the server used
	DropCommand      = "command"                // carries a shell command
	DropForeignTool  = "foreign_tool"           // gives rules for a tool its server does not have
)

var (
	// urlRe and hostRe match addresses on the network.
	urlRe  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>` + "`" + `]+`) })
	hostRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:com|net|org|io|dev|ai|app|co|xyz|info|biz|ru|cn|me|sh|site|online|cloud|tk)\b`)
	})
	// pathRe matches file paths: absolute, home-relative, Windows.
	pathRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:^|[\s"'(=` + "`" + `])((?:~|\$HOME|%[A-Z]+%)?/(?:[\w.-]+/)*[\w.-]+|[A-Za-z]:\\[^\s"'` + "`" + `]+|\.ssh\b|id_rsa\b|\.env\b)`)
	})
	// commandRe matches shell commands and pipelines.
	commandRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)(?:^|[\s` + "`" + `(;|&])(curl|wget|nc|netcat|bash|sh|zsh|powershell|pwsh|cmd\.exe|sudo|chmod|chown|rm\s+-[rf]+|scp|ssh|python3?\s+-c|eval|base64\s+-d)\s+\S|\|\s*(sh|bash)\b|\$\(|&&\s*\w+|;\s*(rm|curl|wget)\b`)
	})
)

// poisoned returns why c reads as an attempt on an agent rather than a
// lesson about a tool, or "". Tool output and model answers are untrusted:
// what reaches an agent's instructions must pass guard.Check (no
// addressing the model, no overriding its instructions, no moving
// secrets, in any of its languages and however disguised), may not carry
// shell commands, or name addresses, paths or tools that the cited calls
// of the same server do not ground.
func poisoned(c *hindsight.Experience, cited []*hindsight.Step, task *hindsight.Task) (reason, detail string) {
	texts := []string{c.Lesson, c.Situation, c.Action, c.Result, c.ErrorTemplate, c.TaskType}
	all := strings.Join(texts, "\n")
	if f := guard.CheckLesson(c.Lesson, texts[1:]...); f != nil {
		return f.Reason, fmt.Sprintf("%q", f.Match)
	}
	if m := commandRe().FindString(all); m != "" {
		return DropCommand, fmt.Sprintf("%q", Truncate(m, 60))
	}
	grounds := groundsOf(c, cited)
	for _, re := range []*regexp.Regexp{urlRe(), hostRe()} {
		for _, m := range re.FindAllString(all, -1) {
			if !grounds(m) {
				return DropURL, fmt.Sprintf("%q is in no cited call of %s", Truncate(m, 60), c.Server)
			}
		}
	}
	for _, m := range pathRe().FindAllStringSubmatch(all, -1) {
		if p := m[1]; !grounds(p) {
			return DropPath, fmt.Sprintf("%q is in no cited call of %s", Truncate(p, 60), c.Server)
		}
	}
	if t := foreignTool(c, cited, task); t != "" {
		return DropForeignTool, fmt.Sprintf("%s is not a tool of %s", t, c.Server)
	}
	return "", ""
}

// groundsOf returns a test of whether a token appears in the arguments of
// a cited call of c's server: a value the agent itself sent there.
func groundsOf(c *hindsight.Experience, cited []*hindsight.Step) func(string) bool {
	var args []string
	for _, s := range cited {
		if c.Server == "" || s.Server == c.Server {
			args = append(args, string(s.Arguments))
		}
	}
	return func(tok string) bool {
		tok = strings.TrimRight(tok, ".,;:)")
		for _, a := range args {
			if strings.Contains(a, tok) {
				return true
			}
		}
		return false
	}
}

// foreignTool returns a snake_case tool-like name that c's lesson tells
// the agent to call ("call X", "use X", "X first") which neither the cited
// steps nor the server's tool list has, or "".
func foreignTool(c *hindsight.Experience, cited []*hindsight.Step, task *hindsight.Task) string {
	known := map[string]bool{}
	for _, s := range cited {
		known[s.Tool] = true
	}
	for i := range task.Steps {
		s := &task.Steps[i]
		if s.Server != c.Server && c.Server != "" {
			continue
		}
		known[s.Tool] = true
		if s.Method == "tools/list" {
			collectSchema(s.Result, map[string]bool{}, known)
		}
	}
	for _, m := range callTool().FindAllStringSubmatch(c.Lesson, -1) {
		if name := m[1]; !known[name] {
			return name
		}
	}
	return ""
}

// callTool matches an instruction to call a tool by a snake_case name.
var callTool = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(?:call|use|invoke|run)\s+(?:the\s+)?([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b`)
})
